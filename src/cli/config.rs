//! `svc describe`, `apply` and `export`: objects and the configuration as a bundle.

use super::*;

/// `describe`: an object (by id, host name or `host/service`, optionally after `host` or
/// `service`) with its effective configuration.
pub(super) async fn describe_object(
    c: &Client,
    as_json: bool,
    target: &[String],
) -> Result<String, CliError> {
    let id = match target {
        [kind, name] if matches!(kind.as_str(), "host" | "service" | "object") => name,
        [one] => one,
        _ => {
            return Err(CliError::Failed(
                "describe takes an id or name, optionally after `host` or `service`".into(),
            ));
        }
    };
    let id = object_id(c, id).await?;
    let object = c.get(&format!("/api/v1/objects/{id}")).await?;
    let effective = c
        .get(&format!("/api/v1/objects/{id}/effective-config"))
        .await?;
    Ok(if as_json {
        format!("{}{}", pretty(&object), pretty(&effective))
    } else {
        describe(&object, &effective)?
    })
}

/// `apply -f FILE` (`-` reads stdin): the bundle's plan, carried out unless `dry_run`.
pub(super) async fn apply(
    c: &Client,
    as_json: bool,
    file: &str,
    prune: bool,
    dry_run: bool,
) -> Result<String, CliError> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| CliError::Failed(format!("cannot read {file}: {e}")))?;
    let path = format!("/api/v1/config/bundles:apply?prune={prune}&dryRun={dry_run}");
    let v = c
        .json(Method::POST, &path, Body::Text("application/yaml", text))
        .await?;
    Ok(if as_json { pretty(&v) } else { plan(&v)? })
}

pub(super) async fn export(c: &Client) -> Result<String, CliError> {
    c.send(Method::GET, "/api/v1/config/bundles:export", Body::None)
        .await
}

/// An object's id, or the id of the object a name names: `web01` (a host) or `web01/disk` (a
/// service of it).
pub(super) async fn object_id(c: &Client, arg: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(arg).is_ok() {
        return Ok(arg.to_string());
    }
    let (list, name, host) = match arg.split_once('/') {
        Some((host, service)) => ("/api/v1/services", service, Some(host)),
        None => ("/api/v1/hosts", arg, None),
    };
    let v = c
        .get(&format!(
            "{list}?limit=5000&withState=false&name={}",
            path_segment(name)
        ))
        .await?;
    let found: Vec<&Value> = items(&v)
        .iter()
        .filter(|o| o["name"] == name && host.is_none_or(|h| o["hostName"] == h))
        .collect();
    match found.as_slice() {
        [one] => Ok(cell(&one["id"], 40)),
        [] => Err(CliError::Failed(format!(
            "no {} named {arg:?}",
            if host.is_some() { "service" } else { "host" }
        ))),
        _ => Err(CliError::Failed(format!(
            "{arg:?} names more than one object; give its id"
        ))),
    }
}
