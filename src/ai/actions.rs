//! Calling a tool under the tenant's policy, and the actions a person approves or denies.

use super::*;

impl Ai {
    /// Calls `tool` as `p` under the tenant's policy: runs it (allow), queues it as an action
    /// (ask) or refuses it (deny). What the caller or the model reads back.
    pub async fn call_tool(
        &self,
        p: &Principal,
        actor: &Actor,
        tool: &Tool,
        args: Value,
        chat: Option<Uuid>,
    ) -> Result<ToolOutcome, AiError> {
        let call = tool.request(&args).map_err(|e| invalid("arguments", e))?;
        if !p.allows(tool.permission) {
            return Ok(ToolOutcome::Refused(format!(
                "the caller lacks the permission {} the tool needs",
                tool.permission
            )));
        }
        match self.policy(p.tenant).await?.mode(tool.name, tool.write) {
            ToolMode::Deny => Ok(ToolOutcome::Refused(format!(
                "the tenant's tool policy does not allow {}",
                tool.name
            ))),
            ToolMode::Ask => {
                let action = self.propose(p, actor, tool, args, chat).await?;
                Ok(ToolOutcome::Queued(action))
            }
            ToolMode::Allow => Ok(ToolOutcome::Ran(self.runner()?.run(p, actor, call).await)),
        }
    }

    pub(super) fn runner(&self) -> Result<&Arc<dyn ToolRunner>, AiError> {
        self.runner
            .get()
            .ok_or_else(|| AiError::Execute("the tools are not connected yet".into()))
    }

    /// The tools, as the API's routes declare them.
    pub fn catalog(&self) -> Result<&Catalog, AiError> {
        Ok(self.runner()?.catalog())
    }

    pub(super) async fn propose(
        &self,
        p: &Principal,
        actor: &Actor,
        tool: &Tool,
        arguments: Value,
        chat: Option<Uuid>,
    ) -> Result<Action, AiError> {
        let id = self.clock.new_id();
        let action = Action {
            id,
            tool: tool.name.into(),
            arguments,
            route: tool.route(),
            status: ActionStatus::Pending,
            proposed_by: owner_of(p),
            chat_id: chat,
            created_at: self.clock.now(),
            decided_by: None,
            decided_at: None,
            result_status: None,
            result: None,
        };
        let audit = self
            .audit(p, actor, "ai.action.propose", format!("ai/action/{id}"))
            .after(&action);
        let (tenant, stored) = (p.tenant, action.clone());
        self.commit(tenant, audit, move |tx| tx.put_ai_action(tenant, &stored))
            .await?;
        Ok(action)
    }

    pub async fn actions(
        &self,
        tenant: Uuid,
        status: Option<ActionStatus>,
    ) -> Result<Vec<Action>, AiError> {
        let mut all = self.store.ai_actions(tenant).await?;
        all.retain(|a| status.is_none_or(|s| a.status == s));
        all.reverse();
        Ok(all)
    }

    pub(super) async fn pending_action(&self, tenant: Uuid, id: &str) -> Result<Action, AiError> {
        let id = parse_id(id)?;
        let action = self
            .store
            .ai_action(tenant, id)
            .await?
            .ok_or(AiError::NotFound)?;
        if action.status != ActionStatus::Pending {
            return Err(AiError::Conflict(
                format!("the action is {:?} already", action.status).to_lowercase(),
            ));
        }
        Ok(action)
    }

    /// Approves a pending action and runs it as the approver, with the approver's
    /// permissions: a person answers for what runs.
    pub async fn approve(
        self: &Arc<Self>,
        p: &Principal,
        actor: &Actor,
        id: &str,
    ) -> Result<Action, AiError> {
        let _held = self.hold(parse_id(id)?)?;
        let mut action = self.pending_action(p.tenant, id).await?;
        let tool = self
            .catalog()?
            .find(&action.tool)
            .ok_or_else(|| AiError::Execute("the tool no longer exists".into()))?;
        if !p.allows(tool.permission) {
            return Err(AiError::Forbidden(tool.permission.into()));
        }
        let call = tool.request(&action.arguments).map_err(AiError::Execute)?;
        let answer = self.runner()?.run(p, actor, call).await;
        let status = if answer.ok() {
            ActionStatus::Executed
        } else {
            ActionStatus::Failed
        };
        action.result_status = Some(answer.status);
        action.result = Some(answer.body.clone());
        let action = self.decided(p, actor, action, status, "approve").await?;
        if !answer.ok() {
            let detail = answer.body["detail"]
                .as_str()
                .map_or_else(|| answer.body.to_string(), str::to_string);
            return Err(AiError::Execute(format!(
                "{} answered {}: {detail}",
                action.route, answer.status
            )));
        }
        Ok(action)
    }

    pub async fn deny(
        self: &Arc<Self>,
        p: &Principal,
        actor: &Actor,
        id: &str,
    ) -> Result<Action, AiError> {
        let _held = self.hold(parse_id(id)?)?;
        let action = self.pending_action(p.tenant, id).await?;
        self.decided(p, actor, action, ActionStatus::Denied, "deny")
            .await
    }

    /// Keeps a person's decision on an action, with its audit entry (`ai.action.<verb>`).
    pub(super) async fn decided(
        &self,
        p: &Principal,
        actor: &Actor,
        mut action: Action,
        status: ActionStatus,
        verb: &str,
    ) -> Result<Action, AiError> {
        action.status = status;
        action.decided_by = Some(owner_of(p));
        action.decided_at = Some(self.clock.now());
        let audit = self
            .audit(
                p,
                actor,
                &format!("ai.action.{verb}"),
                format!("ai/action/{}", action.id),
            )
            .after(&action);
        let (tenant, stored) = (p.tenant, action.clone());
        self.commit(tenant, audit, move |tx| tx.put_ai_action(tenant, &stored))
            .await?;
        Ok(action)
    }
}
