//! Text that may be posted on GitHub about how a run went (a stop's reason, what to do next).
//!
//! A [`UserText`] is made from supervisor's own wording and from text a codeowner wrote, never
//! from an error's detail: a failed effect is said from its [`ErrorClass`], and its detail goes to
//! the journal and the logs ([`UserText::failed`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::failure::{EffectError, ErrorClass};

/// Text fit to post publicly. Serialized as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserText(String);

impl UserText {
    /// supervisor's own wording (names of stages, branches and permissions may be in it; an
    /// error's text may not).
    pub fn ours(text: impl Into<String>) -> UserText {
        UserText(text.into())
    }

    /// What `doing` ("opening the pull request") failing with `e` means, and what to do, from its
    /// class alone; `permission` is what the effect needs, named when GitHub did not name it.
    /// The detail is logged here and kept out of the text.
    pub(crate) fn failed(doing: &str, e: &EffectError, permission: &str) -> UserText {
        let text = match e.class {
            ErrorClass::Permission if e.credentials_refused => format!(
                "{PERMISSION}: {doing} was refused: GitHub did not accept the credentials supervisor uses (expired, revoked or missing); renew them (GH_TOKEN or GITHUB_TOKEN, or the GitHub App's key) with the permission `{}` granted, then run again",
                e.permission_or(permission)
            ),
            ErrorClass::Permission => format!(
                "{PERMISSION}: {doing} was refused: the token or GitHub App supervisor uses lacks the permission `{}`; grant it (or use credentials that have it), then run again",
                e.permission_or(permission)
            ),
            ErrorClass::NotFound => format!(
                "{doing} failed: GitHub (or git) did not find what it names; check that the repository and the branch still exist and that the credentials can see them, then run again"
            ),
            ErrorClass::Conflict => format!(
                "{doing} failed: it conflicts with the state on GitHub (the branch moved, or what it would create exists or is invalid); resolve it by hand, then run again"
            ),
            ErrorClass::Transient => format!(
                "{doing} failed for now (the network, GitHub or git had trouble); run again to go on"
            ),
            ErrorClass::Cancelled => format!("{doing} was cut short: the run was asked to stop"),
        };
        UserText(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How the reason of a stop for a missing permission begins.
pub(crate) const PERMISSION: &str = "permission";

impl fmt::Display for UserText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&'static str> for UserText {
    fn from(s: &'static str) -> UserText {
        UserText(s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DETAIL: &str = "GitHub API error 403 on POST /repos/o/r/pulls: Resource not accessible by integration https://api.github.com/repos/o/r/pulls";

    #[test]
    fn a_failure_is_said_without_its_detail() {
        for class in [
            ErrorClass::Transient,
            ErrorClass::Permission,
            ErrorClass::Conflict,
            ErrorClass::NotFound,
            ErrorClass::Cancelled,
        ] {
            let e = EffectError::new(class, DETAIL);
            let text = UserText::failed("opening the pull request", &e, "Pull requests: write");
            for part in [
                "403",
                "POST /repos",
                "Resource not accessible",
                "api.github.com",
            ] {
                assert!(!text.as_str().contains(part), "{class}: {text}");
            }
            assert!(text.as_str().contains("opening the pull request"), "{text}");
            assert_eq!(
                text.as_str().starts_with("permission:"),
                class == ErrorClass::Permission
            );
        }
    }

    #[test]
    fn a_permission_stop_names_the_permission_and_what_to_do() {
        let mut e = EffectError::new(ErrorClass::Permission, DETAIL);
        let text = UserText::failed("opening the pull request", &e, "Pull requests: write");
        assert!(text.as_str().starts_with("permission: "), "{text}");
        assert!(text.as_str().contains("Pull requests: write"), "{text}");
        assert!(text.as_str().contains("grant it"), "{text}");
        e.permission = Some("Contents: write".into());
        let text = UserText::failed("pushing", &e, "Pull requests: write");
        assert!(text.as_str().contains("Contents: write"), "{text}");
        e.credentials_refused = true;
        let text = UserText::failed("pushing", &e, "Pull requests: write");
        assert!(text.as_str().starts_with("permission: "), "{text}");
        assert!(
            text.as_str().contains("did not accept the credentials"),
            "{text}"
        );
        assert!(text.as_str().contains("Contents: write"), "{text}");
    }
}
