//! The tenant record: every resource belongs to exactly one. A tenant may claim e-mail
//! domains: an address at a claimed domain is that tenant's alone, and a tenant that claims
//! domains holds addresses at them only, so no other tenant's admin can learn which of its
//! people exist or take an address first (e-mail addresses are unique across the instance).

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    pub id: Uuid,
    pub slug: String,
    pub name: String,
    /// E-mail domains this tenant claims (lower case); empty claims none.
    #[serde(default)]
    pub email_domains: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

/// The domain of an e-mail address, lower-cased, without the root's trailing dot
/// (`corp.example.` is `corp.example`).
pub fn email_domain(email: &str) -> String {
    email
        .rsplit_once('@')
        .map_or("", |(_, domain)| domain)
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Why a user of `tenant` may not hold `email`, given every tenant's claims. The answer is the
/// same whether another tenant claims the domain or this one claims others, so it tells a
/// tenant's admin nothing about other tenants.
pub fn email_refusal(tenants: &[Tenant], tenant: Uuid, email: &str) -> Option<String> {
    let domain = email_domain(email);
    let claimed_elsewhere = tenants
        .iter()
        .any(|t| t.id != tenant && t.email_domains.contains(&domain));
    let outside_own = tenants
        .iter()
        .find(|t| t.id == tenant)
        .is_some_and(|t| !t.email_domains.is_empty() && !t.email_domains.contains(&domain));
    (claimed_elsewhere || outside_own)
        .then(|| format!("this tenant may not hold addresses at {domain:?}"))
}

/// The e-mail domains of a request, trimmed, lower-cased and deduplicated, or why not: each a
/// DNS name of letters, digits, '-' and '.' labels.
pub fn parse_email_domains(domains: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::with_capacity(domains.len());
    for raw in domains {
        let d = raw.trim().trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        if d.is_empty() || d.len() > 253 || !d.split('.').all(label_ok) {
            return Err(format!("{raw:?} is not a domain name"));
        }
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(n: u128, domains: &[&str]) -> Tenant {
        let now = Timestamp::from_millis(0).unwrap();
        Tenant {
            id: Uuid::from_u128(n),
            slug: format!("t{n}"),
            name: format!("T{n}"),
            email_domains: domains.iter().map(|d| d.to_string()).collect(),
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }

    #[test]
    fn a_claimed_domain_is_its_tenants_alone() {
        let tenants = [
            tenant(1, &[]),
            tenant(2, &["plant.example"]),
            tenant(3, &[]),
        ];
        let (open, claiming) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(email_refusal(&tenants, open, "a@free.example"), None);
        assert_eq!(email_refusal(&tenants, claiming, "A@Plant.Example"), None);
        assert!(
            email_refusal(&tenants, open, "a@plant.example.").is_some(),
            "the root's dot"
        );
        let elsewhere = email_refusal(&tenants, open, "a@PLANT.example").unwrap();
        let outside = email_refusal(&tenants, claiming, "a@free.example").unwrap();
        assert!(elsewhere.contains("plant.example"), "{elsewhere}");
        assert!(outside.contains("free.example"), "{outside}");
        // The answers do not name the tenant that claims the domain.
        assert!(!elsewhere.contains("t2") && !elsewhere.contains("T2"));
    }

    #[test]
    fn domains_are_dns_names() {
        assert_eq!(
            parse_email_domains(&[" Plant.Example. ".into(), "plant.example".into()]),
            Ok(vec!["plant.example".to_string()])
        );
        for bad in [
            "",
            "a@b.example",
            "-x.example",
            "x..example",
            "x y.example",
            "ex\u{202E}.com",
        ] {
            assert!(parse_email_domains(&[bad.into()]).is_err(), "{bad:?}");
        }
    }
}
