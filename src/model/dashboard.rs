//! A dashboard's layout. SPEC 2.8 keeps it as base64 bytes in `spec`; svc reads those bytes as
//! JSON: `{"tiles": [{"title": "Core switches", "filter": "core-down", "show": "list"}]}`, each
//! tile a saved filter (`saved-filters` by name) shown as a count or as a list.

use serde::Deserialize;

/// At most this many tiles are shown; a layout with more is refused.
pub const MAX_TILES: usize = 24;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layout {
    pub tiles: Vec<Tile>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tile {
    /// Shown above the tile; the filter's name when left out.
    #[serde(default)]
    pub title: Option<String>,
    /// The saved filter whose list the tile shows.
    pub filter: String,
    #[serde(default)]
    pub show: Show,
}

/// How a tile shows its filter's list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Show {
    /// How many match.
    Count,
    /// How many match, and the first ten.
    #[default]
    List,
}

impl Layout {
    /// The layout in a dashboard's `spec`, or why it does not read.
    pub fn from_spec(spec: &str) -> Result<Layout, String> {
        let bytes = super::base64::decode(spec).ok_or("the layout is not base64")?;
        let layout: Layout = serde_json::from_slice(&bytes).map_err(|e| {
            format!("the layout is not {{\"tiles\": [{{\"filter\", \"title\"?, \"show\"?}}]}}: {e}")
        })?;
        if layout.tiles.len() > MAX_TILES {
            return Err(format!("at most {MAX_TILES} tiles"));
        }
        Ok(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_reads_from_base64_json() {
        // {"tiles":[{"filter":"down","show":"count"},{"filter":"open","title":"Open"}]}
        let spec = "eyJ0aWxlcyI6W3siZmlsdGVyIjoiZG93biIsInNob3ciOiJjb3VudCJ9LHsiZmlsdGVyIjoib3BlbiIsInRpdGxlIjoiT3BlbiJ9XX0=";
        let layout = Layout::from_spec(spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(layout.tiles.len(), 2);
        assert_eq!(layout.tiles[0].show, Show::Count);
        assert_eq!(layout.tiles[1].show, Show::List);
        assert_eq!(layout.tiles[1].title.as_deref(), Some("Open"));
        assert!(
            Layout::from_spec("eyJhIjoxfQ==").is_err(),
            "{{\"a\":1}} is no layout"
        );
        assert!(Layout::from_spec("not base64!").is_err());
    }
}
