//! Several sites vote on one object of the main (issue 72): the object names its observers (a
//! selector over the sites) and how many must agree; its state is the verdict of what the
//! sites forward of their own object of the same name, down only when enough observers have
//! agreed for long enough. An observer whose uplink is lost abstains (by default), so a cut
//! link is never a vote.

use super::object::ObjectKind;
use super::selector::Selector;
use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// `spec.observers` of an object at the main.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Observers {
    /// Which sites observe: a selector over each site's labels and `site` (its name).
    pub sites: String,
    /// Down when at least this many voting observers fail (one of this or `failingPct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_failing: Option<u32>,
    /// Down when at least this share of the voting observers fail, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_pct: Option<f64>,
    /// How long enough observers must have agreed before the object is down (default 0).
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub hold: Option<GoDuration>,
    /// What an observer whose uplink is lost counts as: `abstain` (default), `failing` (from
    /// when it went missing) or `ok`. One that has not reported the object yet abstains.
    #[serde(default)]
    pub missing_observer: MissingObserver,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum MissingObserver {
    #[default]
    Abstain,
    Failing,
    Ok,
}

impl Observers {
    /// The site selector, once the whole shape is sound; why not otherwise.
    pub fn check(&self) -> Result<Selector, String> {
        let sites = self
            .sites
            .parse::<Selector>()
            .map_err(|e| format!("observers.sites: {e}"))?;
        match (self.min_failing, self.failing_pct) {
            (Some(_), Some(_)) => Err("observers: minFailing or failingPct, not both".into()),
            (None, None) => Err("observers: minFailing or failingPct is required".into()),
            (Some(0), _) => Err("observers.minFailing: at least 1".into()),
            (_, Some(p)) if !(p > 0.0 && p <= 100.0) => {
                Err("observers.failingPct: more than 0, at most 100".into())
            }
            _ => Ok(sites),
        }
    }

    /// How many of `voting` observers must fail for the object to be down.
    pub fn needed(&self, voting: usize) -> usize {
        match (self.min_failing, self.failing_pct) {
            (Some(n), _) => n as usize,
            (None, Some(p)) => ((voting as f64 * p / 100.0).ceil() as usize).max(1),
            (None, None) => 1,
        }
    }
}

/// What one observer site is known to see of the object.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub site: String,
    /// Since when its heartbeat is overdue (its uplink lost).
    pub stale_since: Option<Timestamp>,
    /// Its own object's last state, as forwarded: none before it forwarded one.
    pub report: Option<Report>,
}

/// An observer's last forwarded state of the object.
#[derive(Clone, Debug)]
pub struct Report {
    pub state: u8,
    pub hard: bool,
    pub output: String,
    /// Since when it has been in a hard problem state.
    pub failing_since: Option<Timestamp>,
    pub last_change: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Ballot {
    Failing,
    Ok,
    Abstains,
}

/// One observer's vote and why.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Vote {
    pub site: String,
    pub vote: Ballot,
    /// The state the site reports (absent before it reported one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<u8>,
    pub output: String,
    /// Since when the vote stands as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Why a missing observer votes as it does (`uplink lost`, `not reported yet`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// `GET /objects/{id}/observers`: the votes and the verdict they make.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub observers: Observers,
    pub votes: Vec<Vote>,
    pub voting: usize,
    pub failing: usize,
    pub needed: usize,
    /// Since when enough observers agree (absent while they do not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreed_since: Option<Timestamp>,
    /// Whether they have agreed for `for`: the object is down.
    pub down: bool,
    /// When the object goes down if nothing changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_at: Option<Timestamp>,
}

/// What the verdict makes of the object's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Down,
    Up,
    /// Nobody votes, or enough agree but not yet for long enough: the state stays.
    Keep,
}

impl Verdict {
    pub fn outcome(&self) -> Outcome {
        if self.down {
            Outcome::Down
        } else if self.voting == 0 || self.agreed_since.is_some() {
            Outcome::Keep
        } else {
            Outcome::Up
        }
    }

    /// The object's state for `outcome` (DOWN for a host, CRITICAL for a service).
    pub fn state(kind: ObjectKind, outcome: Outcome) -> u8 {
        match (outcome, kind) {
            (Outcome::Down, ObjectKind::Host) => 1,
            (Outcome::Down, ObjectKind::Service) => 2,
            _ => 0,
        }
    }

    /// The check output that names who sees what.
    pub fn output(&self) -> String {
        let votes: Vec<String> = self
            .votes
            .iter()
            .map(|v| match (&v.missing, v.vote) {
                (Some(why), Ballot::Abstains) => format!("{} abstains ({why})", v.site),
                (Some(why), ballot) => format!("{} {} ({why})", v.site, ballot_word(ballot)),
                (None, ballot) => format!("{} {}: {}", v.site, ballot_word(ballot), v.output),
            })
            .collect();
        format!(
            "{} of {} observers failing, {} needed\n{}",
            self.failing,
            self.voting,
            self.needed,
            votes.join("\n")
        )
    }
}

fn ballot_word(b: Ballot) -> &'static str {
    match b {
        Ballot::Failing => "failing",
        Ballot::Ok => "ok",
        Ballot::Abstains => "abstains",
    }
}

/// The verdict of `seen` (one per observer site) under `observers` at `now`. Enough agree
/// from the time the last of the first `needed` failing observers began failing; a missing
/// observer moves that to when it went missing, so an observer that drops out never turns
/// an old minority into a verdict at once.
pub fn verdict(observers: &Observers, seen: Vec<Seen>, now: Timestamp) -> Verdict {
    let mut votes = Vec::with_capacity(seen.len());
    let mut latest_missing: Option<Timestamp> = None;
    for s in seen {
        let missing = match (&s.stale_since, &s.report) {
            (Some(since), _) => Some((format!("uplink lost since {since}"), Some(*since))),
            (None, None) => Some(("not reported yet".to_string(), None)),
            (None, Some(_)) => None,
        };
        let vote = match (missing, s.report) {
            (Some((why, since)), report) => {
                latest_missing = latest_missing.max(since);
                // One that never reported has nothing to vote with, whatever the setting.
                let vote = match (since, observers.missing_observer) {
                    (None, _) | (_, MissingObserver::Abstain) => Ballot::Abstains,
                    (Some(_), MissingObserver::Failing) => Ballot::Failing,
                    (Some(_), MissingObserver::Ok) => Ballot::Ok,
                };
                Vote {
                    site: s.site,
                    vote,
                    state: report.as_ref().map(|r| r.state),
                    output: report.map(|r| r.output).unwrap_or_default(),
                    since,
                    missing: Some(why),
                }
            }
            (None, Some(r)) => {
                let failing = r.state != 0 && r.hard;
                Vote {
                    site: s.site,
                    vote: if failing { Ballot::Failing } else { Ballot::Ok },
                    state: Some(r.state),
                    output: r.output,
                    since: if failing {
                        r.failing_since.or(Some(r.last_change))
                    } else {
                        Some(r.last_change)
                    },
                    missing: None,
                }
            }
            (None, None) => unreachable!("no report is missing"),
        };
        votes.push(vote);
    }
    votes.sort_by(|a, b| a.site.cmp(&b.site));
    let voting = votes.iter().filter(|v| v.vote != Ballot::Abstains).count();
    let mut failing_since: Vec<Timestamp> = votes
        .iter()
        .filter(|v| v.vote == Ballot::Failing)
        .filter_map(|v| v.since)
        .collect();
    failing_since.sort();
    let failing = failing_since.len();
    let needed = observers.needed(voting);
    let agreed_since = (voting > 0 && failing >= needed).then(|| {
        let kth = failing_since[needed - 1];
        latest_missing.map_or(kth, |m| kth.max(m))
    });
    let hold = observers.hold.map_or(std::time::Duration::ZERO, |d| d.0);
    let down_at = agreed_since.map(|t| t.plus(hold));
    let down = down_at.is_some_and(|t| t <= now);
    Verdict {
        observers: observers.clone(),
        votes,
        voting,
        failing,
        needed,
        agreed_since,
        down,
        down_at: down_at.filter(|_| !down),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + s as i64 * 1000).unwrap()
    }

    fn report(site: &str, state: u8, since: u64) -> Seen {
        Seen {
            site: site.into(),
            stale_since: None,
            report: Some(Report {
                state,
                hard: true,
                output: format!("{site} says {state}"),
                failing_since: (state != 0).then(|| at(since)),
                last_change: at(since),
            }),
        }
    }

    fn two_of(hold: u64) -> Observers {
        Observers {
            sites: "region=eu".into(),
            min_failing: Some(2),
            failing_pct: None,
            hold: Some(GoDuration(std::time::Duration::from_secs(hold))),
            missing_observer: MissingObserver::Abstain,
        }
    }

    /// Two of three failing for the hold: down; one failing: up; the hold counts from the
    /// second failure.
    #[test]
    fn enough_observers_agreeing_long_enough_make_it_down() {
        let o = two_of(120);
        let seen = || {
            vec![
                report("north", 2, 10),
                report("south", 2, 50),
                report("west", 0, 5),
            ]
        };
        let v = verdict(&o, seen(), at(100));
        assert_eq!((v.voting, v.failing, v.needed), (3, 2, 2));
        assert_eq!(v.agreed_since, Some(at(50)));
        assert_eq!(v.down_at, Some(at(170)));
        assert_eq!(v.outcome(), Outcome::Keep);
        let v = verdict(&o, seen(), at(170));
        assert!(v.down);
        assert_eq!(v.outcome(), Outcome::Down);
        assert_eq!(Verdict::state(ObjectKind::Service, v.outcome()), 2);
        assert!(
            v.output().starts_with("2 of 3 observers failing"),
            "{}",
            v.output()
        );
        assert!(
            v.output().contains("west ok: west says 0"),
            "{}",
            v.output()
        );

        let one = vec![report("north", 2, 10), report("south", 0, 50)];
        let v = verdict(&o, one, at(1000));
        assert_eq!(v.outcome(), Outcome::Up);
    }

    /// A cut observer abstains: it neither fails nor counts, and what it leaves behind waits
    /// the hold again from the moment it went missing; as `failing`, it fails from then.
    #[test]
    fn an_observer_whose_uplink_is_lost_abstains() {
        let pct = Observers {
            min_failing: None,
            failing_pct: Some(60.0),
            ..two_of(60)
        };
        let mut cut = report("west", 0, 5);
        cut.stale_since = Some(at(500));
        let seen = vec![report("north", 2, 10), report("south", 2, 20), cut.clone()];
        let v = verdict(&pct, seen.clone(), at(520));
        assert_eq!((v.voting, v.failing, v.needed), (2, 2, 2));
        assert_eq!(v.votes[2].vote, Ballot::Abstains);
        assert_eq!(
            v.agreed_since,
            Some(at(500)),
            "two of three were no verdict"
        );
        assert_eq!(v.outcome(), Outcome::Keep);
        assert!(verdict(&pct, seen.clone(), at(560)).down);

        let failing = Observers {
            missing_observer: MissingObserver::Failing,
            ..two_of(0)
        };
        let seen = vec![report("north", 2, 10), cut, report("south", 0, 1)];
        let v = verdict(&failing, seen, at(501));
        assert_eq!((v.voting, v.failing), (3, 2));
        assert!(v.down);

        let none = vec![Seen {
            site: "north".into(),
            ..Default::default()
        }];
        let v = verdict(&two_of(0), none, at(1));
        assert_eq!(v.voting, 0);
        assert_eq!(v.outcome(), Outcome::Keep, "nobody voting changes nothing");
    }

    #[test]
    fn a_soft_problem_is_no_vote_to_fail_and_bad_shapes_are_named() {
        let mut soft = report("north", 2, 10);
        soft.report.as_mut().unwrap().hard = false;
        let v = verdict(&two_of(0), vec![soft], at(20));
        assert_eq!(v.votes[0].vote, Ballot::Ok);
        for (o, why) in [
            (
                Observers {
                    failing_pct: Some(50.0),
                    ..two_of(0)
                },
                "not both",
            ),
            (
                Observers {
                    min_failing: None,
                    ..two_of(0)
                },
                "is required",
            ),
            (
                Observers {
                    min_failing: Some(0),
                    ..two_of(0)
                },
                "at least 1",
            ),
            (
                Observers {
                    sites: "a in (".into(),
                    ..two_of(0)
                },
                "observers.sites",
            ),
        ] {
            let err = o.check().unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        assert_eq!(
            Observers {
                min_failing: None,
                failing_pct: Some(50.0),
                ..two_of(0)
            }
            .needed(3),
            2
        );
    }
}
