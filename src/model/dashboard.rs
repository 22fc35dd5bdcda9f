//! A dashboard's layout. SPEC 2.8 keeps it as base64 bytes in `spec`; svc reads those bytes as
//! JSON: `{"tiles": [{"title": "Core switches", "filter": "core-down", "show": "list"}]}`, each
//! tile a saved filter (`saved-filters` by name) shown as a count, a list, or a graph of one
//! metric of the objects it finds (`"show": "graph", "metric": "load1"`).

use serde::{Deserialize, Serialize};

/// At most this many tiles are shown; a layout with more is refused.
pub const MAX_TILES: usize = 24;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layout {
    pub tiles: Vec<Tile>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tile {
    /// Shown above the tile; the filter's name when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The saved filter whose list the tile shows.
    pub filter: String,
    #[serde(default)]
    pub show: Show,
    /// The metric a graph tile draws for each object its filter finds (the first few).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

/// How a tile shows its filter's list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Show {
    /// How many match.
    Count,
    /// How many match, and the first ten.
    #[default]
    List,
    /// A line of `metric` over the last day for each of the first objects that match.
    Graph,
}

impl Show {
    pub const ALL: [Show; 3] = [Show::Count, Show::List, Show::Graph];

    pub fn as_str(self) -> &'static str {
        match self {
            Show::Count => "count",
            Show::List => "list",
            Show::Graph => "graph",
        }
    }
}

impl Layout {
    /// The layout in a dashboard's `spec`, or why it does not read.
    pub fn from_spec(spec: &str) -> Result<Layout, String> {
        let bytes = super::base64::decode(spec).ok_or("the layout is not base64")?;
        let layout: Layout = serde_json::from_slice(&bytes).map_err(|e| {
            format!("the layout is not {{\"tiles\": [{{\"filter\", \"title\"?, \"show\"?}}]}}: {e}")
        })?;
        layout.check()?;
        Ok(layout)
    }

    /// Why the layout cannot be shown, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.tiles.len() > MAX_TILES {
            return Err(format!("at most {MAX_TILES} tiles"));
        }
        for t in &self.tiles {
            if t.filter.trim().is_empty() {
                return Err("every tile names a saved filter".into());
            }
            if t.show == Show::Graph && t.metric.as_deref().is_none_or(|m| m.trim().is_empty()) {
                return Err(format!("the graph tile of {:?} names no metric", t.filter));
            }
        }
        Ok(())
    }

    /// The layout as a dashboard's `spec` keeps it.
    pub fn to_spec(&self) -> String {
        // A layout of strings and enums always serialises.
        let json = serde_json::to_vec(self).unwrap_or_default();
        super::base64::encode(&json)
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

    #[test]
    fn a_layout_round_trips_and_a_graph_tile_needs_its_metric() {
        let layout = Layout {
            tiles: vec![
                Tile {
                    title: Some("Load".into()),
                    filter: "edges".into(),
                    show: Show::Graph,
                    metric: Some("load1".into()),
                },
                Tile {
                    title: None,
                    filter: "down".into(),
                    show: Show::Count,
                    metric: None,
                },
            ],
        };
        assert_eq!(Layout::from_spec(&layout.to_spec()), Ok(layout.clone()));
        let mut no_metric = layout.clone();
        no_metric.tiles[0].metric = None;
        assert!(Layout::from_spec(&no_metric.to_spec()).is_err());
        let mut many = layout;
        many.tiles = vec![many.tiles[1].clone(); MAX_TILES + 1];
        assert!(many.check().is_err());
    }
}
