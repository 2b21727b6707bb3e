//! Labels on issues and GitHub Actions workflow dispatches: what the board-driven modes write
//! besides comments.

use http::Method;
use serde_json::{Value, json};

use super::retry::ApiRequest;
use super::{GitHub, GitHubError, url_encode};

impl GitHub {
    /// Add `label` to an issue (GitHub creates a label it does not know; adding one the issue
    /// has changes nothing).
    pub async fn add_label(&self, issue: u64, label: &str) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!("/issues/{issue}/labels")),
            "/repos/{owner}/{repo}/issues/{number}/labels",
            json!({ "labels": [label] }),
            true,
        );
        self.t.send(&req).await.map_err(self.issue_missing(issue))?;
        Ok(())
    }

    /// Take `label` off an issue; a label it does not have is no error.
    pub async fn remove_label(&self, issue: u64, label: &str) -> Result<(), GitHubError> {
        let mut req = ApiRequest::write(
            Method::DELETE,
            self.repo_path(&format!("/issues/{issue}/labels/{}", url_encode(label))),
            "/repos/{owner}/{repo}/issues/{number}/labels/{name}",
            Value::Null,
            true,
        );
        req.body = None;
        match self.t.send(&req).await {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Start a run of `workflow` (its file name in `.github/workflows/` or its id) on `git_ref`
    /// with `inputs` (`workflow_dispatch`). GitHub answers 204 and queues the run.
    pub async fn dispatch_workflow(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &Value,
    ) -> Result<(), GitHubError> {
        let req = ApiRequest::write(
            Method::POST,
            self.repo_path(&format!(
                "/actions/workflows/{}/dispatches",
                url_encode(workflow)
            )),
            "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
            json!({ "ref": git_ref, "inputs": inputs }),
            // A dispatch sent twice starts two runs.
            false,
        );
        self.t.send(&req).await?;
        Ok(())
    }
}
