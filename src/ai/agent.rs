//! One agent turn: the model answers, asks for tools, reads their results and answers again,
//! for at most the policy's `maxRounds` calls. Every tool call goes through `Ai::call_tool`:
//! the caller's permission and the tenant's policy decide, and write tools that must ask
//! become actions a person approves.

use super::provider::{Endpoint, ToolSpec};
use super::{Ai, AiError, ToolOutcome};
use crate::auth::Principal;
use crate::model::ai::{Chat, Conversation, Message, Role, ToolCall, ToolMode};
use crate::model::identity::Actor;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

pub const SYSTEM_PROMPT: &str = "You are the operations assistant of svc, a monitoring and alerting service. \
Answer from live data: call the tools to read problems, alerts, incidents, objects, events, metrics, \
schedules and who is on call. Write tools (acknowledge, resolve, snooze, silence, downtime, check now, \
incident changes) act as the person you talk to; some wait for a person's approval, some are refused \
by the tenant's policy: say so plainly. Be brief and name the objects and alerts you mean.";

/// What a tool result may put before the model.
const RESULT_MAX: usize = 16 * 1024;

/// Where a turn's messages are kept.
#[derive(Clone)]
pub enum Target {
    Chat(Chat),
    Conversation(Conversation),
}

/// Everything a turn needs, checked by `Ai::begin_*_turn`.
pub struct TurnPlan {
    pub endpoint: Endpoint,
    pub model: String,
    /// The messages so far, the caller's new one last.
    pub history: Vec<Message>,
    pub max_rounds: u32,
    pub target: Target,
}

/// What a turn reports as it goes: the chunks of the AI SDK's UI message stream protocol (its
/// `useChat` reads `POST /ai/chat` as it reads any such endpoint), `data: [DONE]` after them.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum TurnEvent {
    Start {
        #[serde(rename = "messageId")]
        message_id: Uuid,
    },
    TextStart {
        id: String,
    },
    /// Text of the assistant as it arrives.
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ToolInputAvailable {
        #[serde(rename = "toolCallId")]
        id: String,
        #[serde(rename = "toolName")]
        name: String,
        input: Value,
    },
    /// `output.outcome`: `ran`, `queued` (an action awaits approval) or `refused`.
    ToolOutputAvailable {
        #[serde(rename = "toolCallId")]
        id: String,
        output: Value,
    },
    /// `messageMetadata`: the last assistant message's id and the turn's tokens.
    Finish {
        #[serde(rename = "messageMetadata")]
        metadata: Value,
    },
    /// `errorText` starts with the problem's code (`svc:ai/provider: …`).
    Error {
        #[serde(rename = "errorText")]
        text: String,
    },
}

/// The tools the model is offered: those the caller holds and the policy does not refuse.
async fn offered(ai: &Ai, p: &Principal) -> Result<Vec<ToolSpec>, AiError> {
    let policy = ai.policy(p.tenant).await?;
    Ok(ai
        .catalog()?
        .iter()
        .filter(|t| p.allows(t.permission) && policy.mode(t.name, t.write) != ToolMode::Deny)
        .map(|t| ToolSpec {
            name: t.name.into(),
            description: t.description.into(),
            parameters: t.input_schema(),
        })
        .collect())
}

pub fn clip(mut text: String) -> String {
    if text.len() > RESULT_MAX {
        let mut cut = RESULT_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("… (cut)");
    }
    text
}

/// Runs a planned turn to its end, reporting through `emit`, and keeps its messages. Returns
/// the kept target and the assistant's last text.
pub async fn run(
    ai: &Arc<Ai>,
    p: &Principal,
    actor: &Actor,
    plan: TurnPlan,
    emit: &mut (dyn FnMut(TurnEvent) + Send),
) -> Result<(Target, String), AiError> {
    let TurnPlan {
        endpoint,
        model,
        mut history,
        max_rounds,
        target,
    } = plan;
    let specs = offered(ai, p).await?;
    let chat = match &target {
        Target::Chat(c) => Some(c.id),
        Target::Conversation(_) => None,
    };
    let mut tokens = 0;
    let mut last_text = String::new();
    let mut last_id = ai.clock.new_id();
    emit(TurnEvent::Start {
        message_id: last_id,
    });
    let mut failure = None;
    for round in 0..max_rounds {
        let part = format!("text-{round}");
        let mut started = false;
        let mut forward = |t: &str| {
            if !started {
                started = true;
                emit(TurnEvent::TextStart { id: part.clone() });
            }
            emit(TurnEvent::TextDelta {
                id: part.clone(),
                delta: t.to_string(),
            });
        };
        let reply = endpoint
            .complete(
                &ai.http,
                &model,
                SYSTEM_PROMPT,
                &history,
                &specs,
                &mut forward,
            )
            .await;
        if started {
            emit(TurnEvent::TextEnd { id: part });
        }
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                failure = Some(AiError::Provider(e.to_string()));
                break;
            }
        };
        tokens += reply.tokens;
        if round > 0 {
            last_id = ai.clock.new_id();
        }
        last_text.clone_from(&reply.text);
        let calls = reply.tool_calls;
        history.push(Message {
            id: last_id,
            role: Role::Assistant,
            content: reply.text,
            tool_calls: calls.clone(),
            tool_call_id: None,
            created_at: ai.clock.now(),
        });
        if calls.is_empty() {
            break;
        }
        for call in calls {
            emit(TurnEvent::ToolInputAvailable {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.arguments.clone(),
            });
            let output = tool_result(ai, p, actor, &call, chat).await?;
            emit(TurnEvent::ToolOutputAvailable {
                id: call.id.clone(),
                output: output.clone(),
            });
            history.push(Message {
                id: ai.clock.new_id(),
                role: Role::Tool,
                content: clip(output.to_string()),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id),
                created_at: ai.clock.now(),
            });
        }
        if round + 1 == max_rounds {
            last_text = format!("(stopped after {max_rounds} rounds, the policy's maxRounds)");
        }
    }
    let kept = ai.finish_turn(p, actor, target, history, tokens).await?;
    if let Some(e) = failure {
        return Err(e);
    }
    emit(TurnEvent::Finish {
        metadata: json!({"messageId": last_id, "tokens": tokens}),
    });
    Ok((kept, last_text))
}

/// Calls one tool the model asked for and says what came of it (`outcome`: ran, queued or
/// refused), as the model and the stream read it.
async fn tool_result(
    ai: &Ai,
    p: &Principal,
    actor: &Actor,
    call: &ToolCall,
    chat: Option<Uuid>,
) -> Result<Value, AiError> {
    let Some(tool) = ai.catalog()?.find(&call.name) else {
        return Ok(json!({"outcome": "refused", "error": format!("no tool named {}", call.name)}));
    };
    match ai
        .call_tool(p, actor, tool, call.arguments.clone(), chat)
        .await
    {
        Ok(ToolOutcome::Ran(answer)) => {
            Ok(json!({"outcome": "ran", "status": answer.status, "body": answer.body}))
        }
        Ok(ToolOutcome::Queued(action)) => Ok(
            json!({"outcome": "queued", "actionId": action.id, "status": "pending", "note": "waits for a person's approval in /ai/actions"}),
        ),
        Ok(ToolOutcome::Refused(why)) => Ok(json!({"outcome": "refused", "error": why})),
        Err(AiError::Invalid(i)) => {
            Ok(json!({"outcome": "refused", "error": format!("{}: {}", i.field, i.detail)}))
        }
        Err(e) => Err(e),
    }
}
