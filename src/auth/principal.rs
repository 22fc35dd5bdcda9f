//! The authenticated caller of one request.

use super::Permissions;
use super::permissions::is_instance_wide;
use crate::model::identity::{Actor, ActorType, Whoami};
use uuid::Uuid;

#[derive(Clone, Debug)]
pub struct Principal {
    pub actor_type: ActorType,
    pub actor_id: String,
    pub name: String,
    /// The tenant the credential belongs to.
    pub home_tenant: Uuid,
    /// Whether the home tenant is the default tenant: only then do instance-wide permissions
    /// (`auth::permissions::INSTANCE_WIDE`) hold.
    pub instance: bool,
    /// The tenant acted on: the home tenant, or `X-Service-Tenant` for holders of `admin:tenants`.
    pub tenant: Uuid,
    pub permissions: Permissions,
    /// The federation site the credential is bound to (a site's `sites:connect` token).
    pub site: Option<String>,
    /// The user the credential acts for: a session's user, or a personal token's owner.
    pub user: Option<Uuid>,
}

impl Principal {
    /// The service acting for someone who is no user (a contact replying by phone).
    pub fn system(tenant: Uuid, name: String) -> Self {
        Self {
            actor_type: ActorType::System,
            actor_id: name.clone(),
            name,
            home_tenant: tenant,
            instance: false,
            tenant,
            permissions: Permissions::default(),
            site: None,
            user: None,
        }
    }

    /// Whether the principal holds `permission`; an instance-wide one only in the default
    /// tenant.
    pub fn allows(&self, permission: &str) -> bool {
        (self.instance || !is_instance_wide(permission)) && self.permissions.allows(permission)
    }

    pub fn actor(&self, source_ip: String, request_id: String) -> Actor {
        Actor {
            actor_type: self.actor_type,
            actor_id: self.actor_id.clone(),
            source_ip,
            request_id,
        }
    }

    pub fn whoami(&self) -> Whoami {
        Whoami {
            actor_type: self.actor_type,
            actor_id: self.actor_id.clone(),
            name: self.name.clone(),
            tenant_id: self.home_tenant,
            permissions: self.permissions.to_vec(),
        }
    }
}
