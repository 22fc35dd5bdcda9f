//! What running an expression on one event can cost, at most, worked out before it runs (as
//! cel-go's cost estimator does, with the event at hand for its sizes): the steps it takes and
//! the bytes it builds. An expression whose bound is past the budget is not run at all, so no
//! evaluation can allocate or loop past it, whatever its comprehensions build: the `cel` crate
//! has no hook to stop an evaluation once begun, and the bound makes one unneeded.
//!
//! The bound walks the expression with an abstract value per node: the event's own value
//! where a path into it is fixed (`event.payload.items`), else a size bound (its bytes and its
//! members; a member is never larger than what holds it). A comprehension costs its range's
//! members times its body, with the iteration variable bound by the largest member; an
//! accumulator a `map` or `filter` appends to grows by what each step appends.

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;
use std::collections::HashMap;

/// Most steps one expression may take on one event; a step is a byte built or compared, and
/// each node evaluated counts `NODE` of them (about 100 ms of the interpreter).
pub const STEP_BUDGET: f64 = 100_000_000.0;
/// Most bytes one expression may build on one event, all values together.
pub const BYTE_BUDGET: f64 = 32.0 * 1024.0 * 1024.0;
/// What one evaluated node counts, in steps.
const NODE: f64 = 100.0;
/// The bytes of a scalar (number, boolean, null).
const SCALAR: f64 = 16.0;

/// An expression's bound on one event.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Steps taken.
    pub steps: f64,
    /// Bytes built.
    pub bytes: f64,
}

impl Cost {
    /// Both bounds together.
    pub fn plus(self, other: Cost) -> Cost {
        Cost {
            steps: self.steps + other.steps,
            bytes: self.bytes + other.bytes,
        }
    }

    fn times(self, n: f64) -> Cost {
        Cost {
            steps: self.steps * n,
            bytes: self.bytes * n,
        }
    }

    /// Whether the bound is within both budgets.
    pub fn within_budget(&self) -> bool {
        self.steps <= STEP_BUDGET && self.bytes <= BYTE_BUDGET
    }
}

/// A value's bound: its bytes and its members (list or map entries, a string's bytes); each
/// member is within the same bound.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Shape {
    size: f64,
    len: f64,
}

impl Shape {
    const SCALAR: Shape = Shape {
        size: SCALAR,
        len: 0.0,
    };

    fn join(self, other: Shape) -> Shape {
        Shape {
            size: self.size.max(other.size),
            len: self.len.max(other.len),
        }
    }
}

/// A node's value: the event's own where the path to it is fixed, else its bound.
#[derive(Clone, Debug)]
enum Abs<'v> {
    Known(&'v Value),
    Bound(Shape),
}

impl Abs<'_> {
    fn shape(&self) -> Shape {
        match self {
            Abs::Known(v) => shape_of(v),
            Abs::Bound(s) => *s,
        }
    }

    /// The bound of every member (the largest one of a known value).
    fn member(&self) -> Shape {
        match self {
            Abs::Known(Value::Array(items)) => items
                .iter()
                .map(shape_of)
                .fold(Shape::default(), Shape::join),
            Abs::Known(Value::Object(map)) => map.iter().fold(Shape::default(), |s, (k, v)| {
                s.join(shape_of(v)).join(Shape {
                    size: k.len() as f64,
                    len: k.len() as f64,
                })
            }),
            Abs::Known(Value::String(s)) => Shape {
                size: 4.0,
                len: s.len() as f64,
            },
            Abs::Known(_) => Shape::SCALAR,
            Abs::Bound(s) => *s,
        }
    }
}

/// A JSON value's bytes (its encoding, near enough) and members.
fn shape_of(v: &Value) -> Shape {
    match v {
        Value::Array(items) => Shape {
            size: items.iter().map(|i| shape_of(i).size + 1.0).sum::<f64>() + 2.0,
            len: items.len() as f64,
        },
        Value::Object(map) => Shape {
            size: map
                .iter()
                .map(|(k, v)| k.len() as f64 + shape_of(v).size + 4.0)
                .sum::<f64>()
                + 2.0,
            len: map.len() as f64,
        },
        Value::String(s) => Shape {
            size: s.len() as f64,
            len: s.len() as f64,
        },
        _ => Shape::SCALAR,
    }
}

/// The bound of `expr` with `event` bound to the event's view.
pub fn cost(expr: &IdedExpr, event: &Value) -> Cost {
    let mut scope = HashMap::new();
    scope.insert("event".to_string(), Abs::Known(event));
    let mut walk = Walk {
        scope,
        appending: Vec::new(),
    };
    walk.node(expr).1
}

struct Walk<'v> {
    scope: HashMap<String, Abs<'v>>,
    /// Accumulators of the comprehensions being walked whose steps append to them.
    appending: Vec<String>,
}

impl<'v> Walk<'v> {
    fn node(&mut self, e: &IdedExpr) -> (Abs<'v>, Cost) {
        let own = Cost {
            steps: NODE,
            bytes: 0.0,
        };
        match &e.expr {
            Expr::Literal(l) => {
                let size = match l {
                    LiteralValue::String(s) => s.inner().len() as f64,
                    LiteralValue::Bytes(b) => b.inner().len() as f64,
                    _ => SCALAR,
                };
                (
                    Abs::Bound(Shape { size, len: size }),
                    own.plus(Cost {
                        steps: 0.0,
                        bytes: size,
                    }),
                )
            }
            Expr::Ident(name) => (
                self.scope
                    .get(name)
                    .cloned()
                    .unwrap_or(Abs::Bound(Shape::SCALAR)),
                own,
            ),
            Expr::Select(s) => {
                let (operand, c) = self.node(&s.operand);
                let value = if s.test {
                    Abs::Bound(Shape::SCALAR)
                } else {
                    match operand {
                        Abs::Known(Value::Object(map)) => map
                            .get(&s.field)
                            .map_or(Abs::Bound(Shape::SCALAR), Abs::Known),
                        other => Abs::Bound(other.shape()),
                    }
                };
                (value, own.plus(c))
            }
            Expr::List(list) => {
                let (mut shape, mut c) = (Shape::default(), own);
                for item in &list.elements {
                    let (v, ic) = self.node(item);
                    shape.size += v.shape().size + 1.0;
                    shape.len += 1.0;
                    c = c.plus(ic);
                }
                c.bytes += shape.size;
                (Abs::Bound(shape), c)
            }
            Expr::Map(map) => self.entries(map.entries.iter().map(|e| &e.expr), own),
            Expr::Struct(s) => self.entries(s.entries.iter().map(|e| &e.expr), own),
            Expr::Call(call) => {
                let mut operands = Vec::new();
                let mut c = own;
                if let Some(target) = &call.target {
                    let (v, tc) = self.node(target);
                    operands.push((v, target.as_ref()));
                    c = c.plus(tc);
                }
                for arg in &call.args {
                    let (v, ac) = self.node(arg);
                    operands.push((v, arg));
                    c = c.plus(ac);
                }
                let (value, work) = self.call(&call.func_name, &operands);
                (value, c.plus(work))
            }
            Expr::Comprehension(comp) => self.comprehension(comp, own),
            Expr::Unspecified => (Abs::Bound(Shape::SCALAR), own),
        }
    }

    /// A map or struct literal.
    fn entries<'e>(
        &mut self,
        entries: impl Iterator<Item = &'e EntryExpr>,
        own: Cost,
    ) -> (Abs<'v>, Cost) {
        let (mut shape, mut c) = (Shape::default(), own);
        for entry in entries {
            let parts: Vec<&IdedExpr> = match entry {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            };
            for part in parts {
                let (v, pc) = self.node(part);
                shape.size += v.shape().size + 4.0;
                c = c.plus(pc);
            }
            shape.len += 1.0;
        }
        c.bytes += shape.size;
        (Abs::Bound(shape), c)
    }

    /// What a function does beyond its operands' own cost: the bytes it compares or builds.
    fn call(&self, name: &str, operands: &[(Abs<'v>, &IdedExpr)]) -> (Abs<'v>, Cost) {
        let shapes: Vec<Shape> = operands.iter().map(|(v, _)| v.shape()).collect();
        let total = shapes.iter().map(|s| s.size).sum::<f64>();
        let size = |i: usize| shapes.get(i).map_or(0.0, |s| s.size);
        let scalar = |steps: f64| {
            (
                Abs::Bound(Shape::SCALAR),
                Cost {
                    steps,
                    bytes: SCALAR,
                },
            )
        };
        let built = |shape: Shape, steps: f64| {
            (
                Abs::Bound(shape),
                Cost {
                    steps,
                    bytes: shape.size,
                },
            )
        };
        match name {
            "_+_" => {
                let joined = Shape {
                    size: size(0) + size(1),
                    len: shapes.iter().map(|s| s.len).sum(),
                };
                // `accu + [x]` in a `map` or `filter` appends in place: only `[x]` is built.
                let appends = matches!(&operands.first(), Some((_, IdedExpr { expr: Expr::Ident(n), .. })) if self.appending.contains(n));
                let work = if appends { size(1) } else { joined.size };
                (
                    Abs::Bound(joined),
                    Cost {
                        steps: work,
                        bytes: work,
                    },
                )
            }
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => scalar(size(0).min(size(1))),
            "_&&_"
            | "_||_"
            | "!_"
            | "-_"
            | "_-_"
            | "_*_"
            | "_/_"
            | "_%_"
            | "size"
            | "@not_strictly_false"
            | "has" => scalar(0.0),
            "_?_:_" => {
                let joined = shapes
                    .get(1)
                    .copied()
                    .unwrap_or_default()
                    .join(shapes.get(2).copied().unwrap_or_default());
                let known = match (operands.get(1), operands.get(2)) {
                    (Some((Abs::Known(a), _)), Some((Abs::Known(b), _))) if a == b => {
                        Some(Abs::Known(a))
                    }
                    _ => None,
                };
                (known.unwrap_or(Abs::Bound(joined)), Cost::default())
            }
            "_[_]" | "_[?_]" | "_?._" => {
                let key = operands.get(1).and_then(|(_, e)| match &e.expr {
                    Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_string()),
                    _ => None,
                });
                let value = match (operands.first(), key) {
                    (Some((Abs::Known(Value::Object(map)), _)), Some(key)) => {
                        map.get(&key).map_or(Abs::Bound(Shape::SCALAR), Abs::Known)
                    }
                    (Some((container, _)), _) => Abs::Bound(container.member()),
                    (None, _) => Abs::Bound(Shape::SCALAR),
                };
                (value, Cost::default())
            }
            "@in" => scalar(size(0) * shapes.get(1).map_or(0.0, |s| s.len) + size(1)),
            "contains" | "startsWith" | "endsWith" => scalar(total),
            // The pattern is compiled for each call; matching is linear in the text for each
            // state of the pattern.
            "matches" => scalar((size(0) + 1.0) * (size(1) + 1.0) + size(1) * NODE),
            "max" | "min" => {
                let joined = shapes.iter().fold(Shape::default(), |a, s| a.join(*s));
                (
                    Abs::Bound(joined),
                    Cost {
                        steps: total,
                        bytes: 0.0,
                    },
                )
            }
            // Conversions and every other function: what they build is bounded by what they
            // are given (a string of a list is its encoding, near enough).
            _ => built(
                Shape {
                    size: total * 2.0 + SCALAR,
                    len: total * 2.0 + SCALAR,
                },
                total,
            ),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr, own: Cost) -> (Abs<'v>, Cost) {
        let (range, range_cost) = self.node(&c.iter_range);
        let (init, init_cost) = self.node(&c.accu_init);
        let n = match &range {
            Abs::Known(Value::Array(a)) => a.len() as f64,
            Abs::Known(Value::Object(m)) => m.len() as f64,
            Abs::Known(_) => 0.0,
            Abs::Bound(s) => s.len,
        };
        let member = Abs::Bound(range.member());
        let saved: Vec<(String, Option<Abs<'v>>)> = [&c.iter_var, &c.accu_var]
            .into_iter()
            .chain(c.iter_var2.as_ref())
            .map(|v| (v.clone(), self.scope.get(v).cloned()))
            .collect();
        self.scope.insert(c.iter_var.clone(), member.clone());
        if let Some(second) = &c.iter_var2 {
            self.scope.insert(second.clone(), member);
        }
        // One step from the initial accumulator: what a step appends, if it appends.
        self.scope.insert(c.accu_var.clone(), init.clone());
        self.appending.push(c.accu_var.clone());
        let (first, _) = self.node(&c.loop_step);
        let growth = (first.shape().size - init.shape().size).max(0.0);
        let accu = Abs::Bound(Shape {
            size: init.shape().size + n * growth,
            len: init.shape().len + n,
        });
        self.scope.insert(c.accu_var.clone(), accu);
        let (_, cond_cost) = self.node(&c.loop_cond);
        let (_, step_cost) = self.node(&c.loop_step);
        self.appending.pop();
        let (result, result_cost) = self.node(&c.result);
        for (name, before) in saved {
            match before {
                Some(v) => self.scope.insert(name, v),
                None => self.scope.remove(&name),
            };
        }
        let cost = own
            .plus(range_cost)
            .plus(init_cost)
            .plus(cond_cost.plus(step_cost).times(n))
            .plus(result_cost);
        (result, cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(source: &str, event: &Value) -> Cost {
        let program = crate::model::cel::compile(source).unwrap();
        cost(program.expression(), event)
    }

    fn event() -> Value {
        let items: Vec<Value> = (0..1000).map(|i| json!(format!("item-{i:04}"))).collect();
        json!({"severity": "critical", "labels": {"site": "north", "env": "prod"},
               "payload": {"items": items, "blob": "x".repeat(100_000)}})
    }

    #[test]
    fn ordinary_rules_are_well_within_the_budget() {
        let e = event();
        for rule in [
            "event.severity == 'critical'",
            "event.labels.site == 'north' && event.labels['env'] in ['prod', 'staging']",
            "event.payload.items.exists(i, i.startsWith('item-09'))",
            "event.payload.items.filter(i, i.endsWith('7')).size() > 3",
            "event.payload.items.map(i, i + '!').size() == 1000",
            "event.payload.blob.contains('needle')",
            "event.labels.all(k, event.labels[k] != '')",
        ] {
            let c = of(rule, &e);
            assert!(c.within_budget(), "{rule}: {c:?}");
            assert!(c.steps > 0.0, "{rule}");
        }
    }

    #[test]
    fn rules_that_build_or_loop_without_bound_are_over_it() {
        let e = event();
        let long = format!("'{}'", "a".repeat(1500));
        for rule in [
            // A million strings of 100 kB.
            "event.payload.items.map(i, event.payload.items.map(j, event.payload.blob + i))"
                .to_string(),
            // Strings built by a literal's size, two comprehensions deep.
            format!("event.payload.items.map(i, event.payload.items.map(j, {long} + {long}))"),
            // A million concatenations, each compared with a 100 kB text.
            "event.payload.items.all(i, event.payload.items.all(j, i + j != event.payload.blob))"
                .to_string(),
            // A regex over a large text for each member.
            "event.payload.items.exists(i, event.payload.blob.matches('(a|b)*c' + i))".to_string(),
        ] {
            let c = of(&rule, &e);
            assert!(!c.within_budget(), "{rule}: {c:?}");
        }
    }

    #[test]
    fn a_bound_grows_with_the_event_it_is_run_on() {
        let rule = "event.payload.items.map(i, event.payload.items.map(j, i + j)).size() > 0";
        let small = json!({"payload": {"items": ["a", "b", "c"]}});
        let small = of(rule, &small);
        assert!(small.within_budget(), "{small:?}");
        assert!(!of(rule, &event()).within_budget());
        // A path that is not in the event costs nothing to loop over.
        assert!(of("event.payload.none.all(x, x == 1)", &small_event()).steps < 10_000.0);
    }

    fn small_event() -> Value {
        json!({"payload": {}})
    }
}
