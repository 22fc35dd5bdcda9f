//! The AI agent's routes (`/api/v1/ai/*`) and the runner through which tools call the API as
//! their caller.

use super::AppState;
use super::access::{Caller, Delegated};
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::pagination::{Page, PageQuery, PageRules};
use super::router::Route;
use crate::ai::agent::{self, Target, TurnEvent};
use crate::ai::tools::{ApiAnswer, ApiCall, Catalog};
use crate::ai::{AiError, ToolRunner};
use crate::auth::Principal;
use crate::model::ai::{
    Action, ActionStatus, Chat, ChatInput, Connection, ConnectionInput, ConnectionTest,
    Conversation, ConverseRequest, ModelInfo, ProviderInfo, SendInput, ToolInfo, ToolPolicy,
};
use crate::model::identity::Actor;
use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, Method, Request, StatusCode};
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use tower::ServiceExt;

const CHATS: PageRules = PageRules {
    default: 50,
    max: Some(500),
};
const CONVERSATIONS: PageRules = PageRules {
    default: 50,
    max: Some(500),
};
const ACTIONS: PageRules = PageRules {
    default: 100,
    max: Some(1000),
};
const CATALOG: PageRules = PageRules {
    default: 100,
    max: Some(1000),
};

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/ai/tools", tools).permission("events:read").doc("ai", "Agent tool catalog with policy state", "The tools `/mcp` and the agent offer, each an API route and nothing more: `{name, description, permission, write, policy (allow, ask, deny), permitted (the caller holds the permission), route, inputSchema}`. Answers with AI off too: `/mcp` uses the catalog.")
            .query::<PageQuery>().ok::<Page<ToolInfo>>(),
        Route::get("/api/v1/ai/providers", providers).permission("events:read").doc("ai", "AI provider catalog", "The wire formats a connection may speak: `openai` (chat completions, streamed, with tool calls) and `anthropic` (messages, with tool use); `available` is false while `ai.provider` is none.")
            .query::<PageQuery>().ok::<Page<ProviderInfo>>(),
        Route::get("/api/v1/ai/policy", get_policy).permission("admin:ai").doc("ai", "Agent tool policy", "The tenant's policy (the reference's `ToolPolicy`, with `ask` ours): read tools run unless `disabled` names them; write tools are refused unless `autoApprove` (run) or `ask` (wait for approval in `/ai/actions`) names them; `disabled` wins.")
            .ok::<ToolPolicy>(),
        Route::put("/api/v1/ai/policy", put_policy).permission("admin:ai").doc("ai", "Update agent tool policy", "Replaces the policy; no If-Match (SPEC 9); `version` counts the changes. A name that is no tool is 422 `svc:validation/policy`, as `maxRounds` outside 1 to 32.")
            .body::<ToolPolicy>().ok::<ToolPolicy>(),
        Route::get("/api/v1/ai/actions", actions).permission("alerts:read").doc("ai", "AI action approval queue", "Write tool calls the policy made wait (`ask`), newest first; `status` filters (pending, executed, failed, denied). Limit 100 by default.")
            .query::<ActionQuery>().ok::<Page<Action>>(),
        Route::post("/api/v1/ai/actions/{id}:approve", approve).permission("config:write").doc("ai", "Approve and execute a proposed action", "Runs the call as the approver, who must hold the tool's permission (else 403, the action stays pending); the action becomes `executed`, or `failed` with the call's answer and 502 `svc:ai/execute`. Not pending: 409 `svc:conflict`.")
            .no_body().ok::<Action>().fails(409, "The action was decided already (`svc:conflict`)").fails(502, "The approved call failed (`svc:ai/execute`)"),
        Route::post("/api/v1/ai/actions/{id}:deny", deny).permission("alerts:ack").doc("ai", "Deny a proposed action", "The action becomes `denied`; nothing runs. Not pending: 409 `svc:conflict`.")
            .no_body().ok::<Action>().fails(409, "The action was decided already (`svc:conflict`)"),
        Route::get("/api/v1/ai/connections", connections).permission("events:read").doc("ai", "List AI provider connections", "The caller's own connections and the tenant's shared ones; `apiKey` is never returned (`hasApiKey` says whether one is stored). 503 `svc:ai/disabled` while `ai.provider` is none.")
            .query::<PageQuery>().ok::<Page<Connection>>().fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::post("/api/v1/ai/connections", create_connection).permission("events:read").doc("ai", "Create AI provider connection", "`ConnectionInput`; `apiKey` is sealed as a tenant secret. The endpoint must be one the configuration names (`ai.endpoint`, `ai.endpoints`, or the provider's public one), else 422 `svc:validation/endpoint`. `shared` needs `admin:ai`. A taken name is 409 `svc:conflict`.")
            .body::<ConnectionInput>().answers::<Connection>(201).fails(409, "The name is taken (`svc:conflict`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::put("/api/v1/ai/connections/{id}", update_connection).permission("events:read").doc("ai", "Update AI provider connection", "No If-Match (SPEC 9). `apiKey` left out keeps the stored key, an empty string removes it. A shared connection needs `admin:ai`.")
            .body::<ConnectionInput>().ok::<Connection>().fails(409, "The name is taken (`svc:conflict`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::delete("/api/v1/ai/connections/{id}", delete_connection).permission("events:read").doc("ai", "Delete AI provider connection", "204; its key goes with it. A shared connection needs `admin:ai`; with `shared=true` the connection must be a shared one, else 404.")
            .query::<SharedQuery>().answers_empty(204).fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::get("/api/v1/ai/connections/{id}/models", models).permission("events:read").doc("ai", "List models of a connection", "The provider's `GET /models`: `{items: [{id}]}`; 502 `svc:ai/provider` when it fails.")
            .query::<PageQuery>().ok::<Page<ModelInfo>>().fails(502, "The provider failed (`svc:ai/provider`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::post("/api/v1/ai/connections/{id}:test", test_connection).permission("events:read").doc("ai", "Test an AI provider connection", "Lists the provider's models: `{ok, models, latencyMs}`; 502 `svc:ai/provider` with the provider's answer when it fails.")
            .no_body().ok::<ConnectionTest>().fails(502, "The provider failed (`svc:ai/provider`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::get("/api/v1/ai/chats", chats).permission("events:read").doc("ai", "List my agent chats", "The caller's chats, newest first, without their messages.")
            .query::<PageQuery>().ok::<Page<Chat>>().fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::post("/api/v1/ai/chats", create_chat).permission("events:read").doc("ai", "Create an agent chat", "`chatInput`: `title`, `connectionId` (one the caller sees; none: the instance connection), `model`, `settings` (kept as given). 201. A title another of the caller's chats has is 409 `svc:conflict`; untitled chats are \"New chat\", \"New chat 2\"...")
            .body::<ChatInput>().answers::<Chat>(201).fails(409, "The title is taken (`svc:conflict`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::get("/api/v1/ai/chats/{id}", get_chat).permission("events:read").doc("ai", "Chat with messages", "Only the owner's: another's chat is 404.")
            .ok::<Chat>().fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::put("/api/v1/ai/chats/{id}", update_chat).permission("events:read").doc("ai", "Update chat settings", "Fields given replace the stored ones; no If-Match (SPEC 9). 409 `svc:ai/busy` while a turn streams, `svc:conflict` for a title another of the caller's chats has.")
            .body::<ChatInput>().ok::<Chat>().fails(409, "A turn is streaming (`svc:ai/busy`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::delete("/api/v1/ai/chats/{id}", delete_chat).permission("events:read").doc("ai", "Delete a chat", "204; 409 `svc:ai/busy` while a turn streams.")
            .answers_empty(204).fails(409, "A turn is streaming (`svc:ai/busy`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::delete("/api/v1/ai/chats/{id}/messages/{msgId}", delete_message).permission("events:read").doc("ai", "Delete one chat message", "204.")
            .answers_empty(204).fails(409, "A turn is streaming (`svc:ai/busy`)").fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::post("/api/v1/ai/chat", chat_turn).permission("events:read").doc("ai", "Stream an agent turn (SSE)", "`sendInput`: `chatId`, `message` (the caller's new message), or `trigger: regenerate-message` with `messageId` (answers again from that message). 201 `text/event-stream` in the AI SDK's UI message stream protocol (`x-vercel-ai-ui-message-stream: v1`): one JSON object per `data:` line, `data: [DONE]` last; `type` one of `start {messageId}`, `text-start {id}`, `text-delta {id, delta}`, `text-end {id}`, `tool-input-available {toolCallId, toolName, input}`, `tool-output-available {toolCallId, output}` (`output.outcome`: ran, queued with `actionId`, refused), `finish {messageMetadata: {messageId, tokens}}`, `error {errorText}` (the problem's code first). One turn at a time per chat: 409 `svc:ai/busy`. Tool calls act as the caller under the tenant's policy. 503 `svc:ai/disabled` when AI is off, the month's token budget is spent, or turns are at `ai.maxConcurrentTurns` (with Retry-After).")
            .no_deadline().body::<SendInput>().answers_text(201, "text/event-stream").fails(409, "A turn is streaming (`svc:ai/busy`)").fails(503, "AI is off, out of budget or shedding load (`svc:ai/disabled`)"),
        Route::get("/api/v1/ai/conversations", conversations).permission("events:read").doc("ai", "List conversations", "The caller's conversations, `updatedAt` descending, 50 by default, without their messages.")
            .query::<PageQuery>().ok::<Page<Conversation>>().fails(503, "AI is off (`svc:ai/disabled`)"),
        Route::post("/api/v1/ai/conversations", converse).permission("events:read").doc("ai", "Talk to the assistant", "`converseRequest`: `message`, and `conversationId` to go on with one. Runs one agent turn through the instance connection (`ai.model`), else the tenant's first shared connection with a default model, and answers 201 with the transcript and `reply`. 502 `svc:ai/provider` when the provider fails; one turn at a time per conversation (409 `svc:ai/busy`).")
            .no_deadline().body::<ConverseRequest>().answers::<Conversation>(201).fails(409, "A turn is running on the conversation (`svc:ai/busy`)").fails(502, "The provider failed (`svc:ai/provider`)").fails(503, "AI is off, out of budget or shedding load (`svc:ai/disabled`)"),
        Route::get("/api/v1/ai/conversations/{id}", conversation).permission("events:read").doc("ai", "Conversation transcript", "Only the owner's: another's is 404.")
            .ok::<Conversation>().fails(503, "AI is off (`svc:ai/disabled`)"),
    ]
}

/// `GET /ai/actions` filters.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ActionQuery {
    /// pending, executed, failed or denied.
    pub status: Option<String>,
    #[serde(flatten)]
    pub page: PageQuery,
}

/// `DELETE /ai/connections/{id}` parameters.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SharedQuery {
    /// `true`: the connection must be a shared one (else 404).
    pub shared: Option<String>,
}

async fn tools(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let all = st.ai.tools(&c.principal).await?;
    Ok(Json(Page::after(all, &q.resolve(CATALOG), |t| {
        t.name.clone()
    })))
}

async fn providers(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> impl IntoResponse {
    Json(Page::after(st.ai.providers(), &q.resolve(CATALOG), |p| {
        p.id.clone()
    }))
}

async fn get_policy(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.policy(c.principal.tenant).await?))
}

async fn put_policy(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<ToolPolicy>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.set_policy(&c.principal, &c.actor, body).await?))
}

async fn actions(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ActionQuery>,
) -> Result<impl IntoResponse, Problem> {
    let status =
        match q.status.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => Some(ActionStatus::parse(s).ok_or_else(|| {
                Problem::validation("status", "pending, executed, failed or denied")
            })?),
            None => None,
        };
    let all = st.ai.actions(c.principal.tenant, status).await?;
    Ok(Json(Page::after(all, &q.page.resolve(ACTIONS), |a| {
        a.id.to_string()
    })))
}

async fn approve(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.approve(&c.principal, &c.actor, &id).await?))
}

async fn deny(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.deny(&c.principal, &c.actor, &id).await?))
}

async fn connections(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let all = st.ai.connections(&c.principal).await?;
    Ok(Json(Page::after(all, &q.resolve(CATALOG), |c| {
        c.id.to_string()
    })))
}

async fn create_connection(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<ConnectionInput>,
) -> Result<impl IntoResponse, Problem> {
    let created = st
        .ai
        .create_connection(&c.principal, &c.actor, body)
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

async fn update_connection(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ConnectionInput>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.ai
            .update_connection(&c.principal, &c.actor, &id, body)
            .await?,
    ))
}

async fn delete_connection(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<SharedQuery>,
) -> Result<impl IntoResponse, Problem> {
    let shared = q.shared.as_deref() == Some("true");
    st.ai
        .delete_connection(&c.principal, &c.actor, &id, shared)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn models(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let all: Vec<ModelInfo> = st
        .ai
        .models(&c.principal, &id)
        .await?
        .into_iter()
        .map(|id| ModelInfo { id })
        .collect();
    Ok(Json(Page::after(all, &q.resolve(CATALOG), |m| {
        m.id.clone()
    })))
}

async fn test_connection(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.test_connection(&c.principal, &id).await?))
}

async fn chats(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let all = st.ai.chats(&c.principal).await?;
    Ok(Json(Page::after(all, &q.resolve(CHATS), |c| {
        c.id.to_string()
    })))
}

async fn create_chat(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<ChatInput>,
) -> Result<impl IntoResponse, Problem> {
    let chat = st.ai.create_chat(&c.principal, &c.actor, body).await?;
    Ok((StatusCode::CREATED, Json(chat)))
}

async fn get_chat(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.chat(&c.principal, &id).await?))
}

async fn update_chat(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ChatInput>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.ai.update_chat(&c.principal, &c.actor, &id, body).await?,
    ))
}

async fn delete_chat(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.ai.delete_chat(&c.principal, &c.actor, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_message(
    State(st): State<AppState>,
    c: Caller,
    ApiPath((id, message)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, Problem> {
    st.ai
        .delete_message(&c.principal, &c.actor, &id, &message)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn frame(event: &TurnEvent) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("data: {data}\n\n"))
}

/// The header that marks an AI SDK UI message stream.
const UI_MESSAGE_STREAM: &str = "x-vercel-ai-ui-message-stream";

/// Streams one turn: the checks answer as problems before the stream starts; once it runs,
/// a failure is its last event.
async fn chat_turn(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<SendInput>,
) -> Result<impl IntoResponse, Problem> {
    let (plan, guard) = st.ai.begin_chat_turn(&c.principal, body).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let ai = st.ai.clone();
    tokio::spawn(async move {
        let _guard = guard;
        let sink = tx.clone();
        let mut emit = move |e: TurnEvent| {
            let _ = sink.send(frame(&e));
        };
        if let Err(e) = agent::run(&ai, &c.principal, &c.actor, plan, &mut emit).await {
            let p = Problem::from(e);
            let _ = tx.send(frame(&TurnEvent::Error {
                text: format!("{}: {}", p.code.as_str(), p.detail),
            }));
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n"));
    });
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok((
        StatusCode::CREATED,
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
            (HeaderName::from_static(UI_MESSAGE_STREAM), "v1"),
        ],
        Body::from_stream(frames),
    ))
}

async fn conversations(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let all = st.ai.conversations(&c.principal).await?;
    Ok(Json(Page::after(all, &q.resolve(CONVERSATIONS), |c| {
        c.id.to_string()
    })))
}

async fn converse(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<ConverseRequest>,
) -> Result<impl IntoResponse, Problem> {
    let (plan, _guard) = st
        .ai
        .begin_conversation_turn(&c.principal, body.conversation_id, body.message)
        .await?;
    let (kept, reply) = agent::run(&st.ai, &c.principal, &c.actor, plan, &mut |_| {}).await?;
    let Target::Conversation(mut conversation) = kept else {
        return Err(AiError::Execute("a conversation turn kept a chat".into()).into());
    };
    conversation.reply = Some(reply);
    Ok((StatusCode::CREATED, Json(conversation)))
}

async fn conversation(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.ai.conversation(&c.principal, &id).await?))
}

/// The service's own API as the tools' way in: each call is a request through the whole
/// router (access, deadline, handler, problem rendering) as the delegating principal.
pub struct ApiRunner {
    pub router: axum::Router,
    /// The tools the routes declare.
    pub catalog: Catalog,
}

/// The address the delegating request came from (unspecified when it cannot be read).
fn caller_ip(actor: &Actor) -> IpAddr {
    actor
        .source_ip
        .parse()
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// The most of an answer a tool call reads.
const ANSWER_MAX: usize = 4 << 20;

impl ToolRunner for ApiRunner {
    fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    fn run<'a>(
        &'a self,
        principal: &'a Principal,
        actor: &'a Actor,
        call: ApiCall,
    ) -> Pin<Box<dyn Future<Output = ApiAnswer> + Send + 'a>> {
        Box::pin(async move {
            let method = Method::from_bytes(call.method.as_bytes()).unwrap_or(Method::GET);
            let body = call
                .body
                .map_or_else(Body::empty, |b| Body::from(b.to_string()));
            let mut req = match Request::builder()
                .method(method)
                .uri(&call.path)
                .header(CONTENT_TYPE, "application/json")
                .body(body)
            {
                Ok(r) => r,
                Err(e) => {
                    return ApiAnswer {
                        status: 400,
                        body: json!({"detail": e.to_string()}),
                    };
                }
            };
            req.extensions_mut().insert(Delegated(principal.clone()));
            req.extensions_mut()
                .insert(ConnectInfo(SocketAddr::new(caller_ip(actor), 0)));
            let res = match self.router.clone().oneshot(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            let status = res.status().as_u16();
            let bytes = axum::body::to_bytes(res.into_body(), ANSWER_MAX)
                .await
                .unwrap_or_default();
            let body = serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            ApiAnswer { status, body }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::router::{routes, tool_of};

    /// The routes declare the tools: each name once, every path part among the arguments the
    /// model is told of, and none lost (the catalog the agent and `/mcp` offered before the
    /// routes declared them).
    #[test]
    fn the_routes_declare_the_tools() {
        let tools: Vec<_> = routes().iter().filter_map(tool_of).collect();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a name is declared twice");
        for expected in [
            "problems_list",
            "alerts_list",
            "alert_get",
            "incidents_list",
            "incident_get",
            "objects_list",
            "object_get",
            "events_list",
            "metrics_query",
            "oncall_now",
            "schedules_list",
            "silences_list",
            "downtimes_list",
            "alert_ack",
            "alert_resolve",
            "alert_snooze",
            "silence_create",
            "downtime_create",
            "check_now",
            "incident_resolve",
            "incident_merge",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} is no longer declared"
            );
        }
        for t in &tools {
            let schema = t.input_schema();
            for required in schema["required"].as_array().unwrap() {
                let name = required.as_str().unwrap();
                assert!(
                    t.args.iter().any(|a| a.0 == name),
                    "{}: {name} is no argument",
                    t.name
                );
            }
        }
    }
}
