//! The JSON objects the REST API answers with, in GitHub's full shape: every field GitHub's REST
//! description marks as required is present (users' `*_url`s, `assignee`, `milestone`, pull
//! requests' `head.repo`, check runs' `app` and `check_suite`, …), so a client that reads one of
//! them works against github.com too. Ids are as large as github.com's: issue and comment ids above
//! 2^31, and an issue's `id` is not its `number`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::git::{CommitInfo, FileDiff, GitRemote, Mergeability};
use super::state::{
    AppSeed, CheckRunSeed, CommentSeed, IssueSeed, PullSeed, ReviewCommentSeed, ReviewSeed,
    SandboxState, SeedState,
};
use super::{Origin, ids};

/// GitHub's timestamp format: seconds, no fraction, `Z`.
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn time(t: Option<DateTime<Utc>>) -> String {
    iso(t.unwrap_or_else(Utc::now))
}

/// Where line comment `c` of `p` stands on the pull request's head now: `None` once a commit
/// after the one it was made on changed its line (GitHub shows it as outdated), or when it has no
/// line.
pub(crate) fn current_line(git: &GitRemote, p: &PullSeed, c: &ReviewCommentSeed) -> Option<u64> {
    let line = c.line?;
    match (&c.commit_id, git.branch_sha(&p.head)) {
        (Some(commit), Some(head)) if *commit != head => git.line_at(commit, &head, &c.path, line),
        _ => Some(line),
    }
}

/// Builds answers for one request, with URLs under where the caller reached the sandbox.
pub(crate) struct Shapes<'a> {
    pub(crate) origin: &'a Origin,
    pub(crate) st: &'a SandboxState,
    /// For webhook payloads, whose objects differ a little from the REST API's: users without
    /// `user_view_type`, repositories with `custom_properties` and `web_commit_signoff_required`
    /// and without the counts of `full-repository`, issues without `closed_by`.
    webhook: bool,
}

impl<'a> Shapes<'a> {
    pub(super) fn new(origin: &'a Origin, st: &'a SandboxState) -> Shapes<'a> {
        Shapes {
            origin,
            st,
            webhook: false,
        }
    }

    /// Shapes for webhook payloads.
    pub(crate) fn for_webhooks(origin: &'a Origin, st: &'a SandboxState) -> Shapes<'a> {
        Shapes {
            webhook: true,
            ..Shapes::new(origin, st)
        }
    }

    /// `rest` under the repository's API URL.
    pub(crate) fn api(&self, rest: &str) -> String {
        format!(
            "{}/repos/{}/{}{rest}",
            self.origin.api, self.st.repo.owner, self.st.repo.name
        )
    }

    /// `rest` under the repository's web URL.
    pub(crate) fn web(&self, rest: &str) -> String {
        format!(
            "{}/{}/{}{rest}",
            self.origin.web, self.st.repo.owner, self.st.repo.name
        )
    }

    /// GitHub's `author_association` of `login` on the repository.
    pub(crate) fn association(&self, login: &str) -> &'a str {
        self.st.association(login)
    }

    /// A user (or organization, or bot) as `simple-user`.
    pub(crate) fn user(&self, login: &str) -> Value {
        let kind = if login.ends_with("[bot]") {
            "Bot"
        } else if self.st.is_org(login) {
            "Organization"
        } else {
            "User"
        };
        let api = format!("{}/users/{login}", self.origin.api);
        let mut user = json!({
            "login": login,
            "id": ids::user(login),
            "node_id": ids::user_node(login, kind),
            "avatar_url": format!("{}/avatars/{login}", self.origin.web),
            "gravatar_id": "",
            "url": api,
            "html_url": format!("{}/{login}", self.origin.web),
            "followers_url": format!("{api}/followers"),
            "following_url": format!("{api}/following{{/other_user}}"),
            "gists_url": format!("{api}/gists{{/gist_id}}"),
            "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
            "subscriptions_url": format!("{api}/subscriptions"),
            "organizations_url": format!("{api}/orgs"),
            "repos_url": format!("{api}/repos"),
            "events_url": format!("{api}/events{{/privacy}}"),
            "received_events_url": format!("{api}/received_events"),
            "type": kind,
            "user_view_type": "public",
            "site_admin": false,
        });
        if self.webhook {
            remove(&mut user, &["user_view_type"]);
        }
        user
    }

    /// The authenticated user (`GET /user`), as `public-user`.
    pub(crate) fn account(&self, login: &str) -> Value {
        let mut u = self.user(login);
        let name = self
            .st
            .users
            .iter()
            .find(|s| s.login.eq_ignore_ascii_case(login))
            .and_then(|s| s.name.clone());
        let created = iso(DateTime::from_timestamp(1_300_000_000, 0).unwrap_or_default());
        if let Value::Object(m) = &mut u {
            for (k, v) in [
                ("name", json!(name)),
                ("company", Value::Null),
                ("blog", json!("")),
                ("location", Value::Null),
                ("email", Value::Null),
                ("hireable", Value::Null),
                ("bio", Value::Null),
                ("twitter_username", Value::Null),
                ("public_repos", json!(1)),
                ("public_gists", json!(0)),
                ("followers", json!(0)),
                ("following", json!(0)),
                ("created_at", json!(created)),
                ("updated_at", json!(created)),
            ] {
                m.insert(k.into(), v);
            }
        }
        u
    }

    /// The repository, as `repository` (in pull requests) or `full-repository` (`full`).
    pub(crate) fn repository(&self, full: bool) -> Value {
        let r = &self.st.repo;
        let api = self.api("");
        let created = iso(DateTime::from_timestamp(1_400_000_000, 0).unwrap_or_default());
        let open = self
            .st
            .issues
            .iter()
            .filter(|i| i.state == SeedState::Open)
            .count();
        let mut v = json!({
            "id": ids::REPO_ID,
            "node_id": ids::REPO,
            "name": r.name,
            "full_name": format!("{}/{}", r.owner, r.name),
            "owner": self.user(&r.owner),
            "private": r.private,
            "visibility": if r.private { "private" } else { "public" },
            "html_url": self.web(""),
            "description": Value::Null,
            "fork": false,
            "url": api,
            "git_url": format!("{}.git", self.web("")),
            "ssh_url": format!("git@sandbox:{}/{}.git", r.owner, r.name),
            "clone_url": format!("{}.git", self.web("")),
            "svn_url": self.web(""),
            "mirror_url": Value::Null,
            "homepage": Value::Null,
            "language": Value::Null,
            "license": Value::Null,
            "forks": 0,
            "forks_count": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "size": 1,
            "default_branch": r.default_branch,
            "open_issues_count": open,
            "open_issues": open,
            "is_template": false,
            "topics": [],
            "has_issues": true,
            "has_projects": true,
            "has_wiki": false,
            "has_pages": false,
            "has_downloads": true,
            "has_discussions": false,
            "archived": false,
            "disabled": false,
            "pushed_at": created,
            "created_at": created,
            "updated_at": created,
        });
        // The URL templates GitHub lists for every repository.
        let templates = [
            ("archive_url", "/{archive_format}{/ref}"),
            ("assignees_url", "/assignees{/user}"),
            ("blobs_url", "/git/blobs{/sha}"),
            ("branches_url", "/branches{/branch}"),
            ("collaborators_url", "/collaborators{/collaborator}"),
            ("comments_url", "/comments{/number}"),
            ("commits_url", "/commits{/sha}"),
            ("compare_url", "/compare/{base}...{head}"),
            ("contents_url", "/contents/{+path}"),
            ("contributors_url", "/contributors"),
            ("deployments_url", "/deployments"),
            ("downloads_url", "/downloads"),
            ("events_url", "/events"),
            ("forks_url", "/forks"),
            ("git_commits_url", "/git/commits{/sha}"),
            ("git_refs_url", "/git/refs{/sha}"),
            ("git_tags_url", "/git/tags{/sha}"),
            ("hooks_url", "/hooks"),
            ("issue_comment_url", "/issues/comments{/number}"),
            ("issue_events_url", "/issues/events{/number}"),
            ("issues_url", "/issues{/number}"),
            ("keys_url", "/keys{/key_id}"),
            ("labels_url", "/labels{/name}"),
            ("languages_url", "/languages"),
            ("merges_url", "/merges"),
            ("milestones_url", "/milestones{/number}"),
            (
                "notifications_url",
                "/notifications{?since,all,participating}",
            ),
            ("pulls_url", "/pulls{/number}"),
            ("releases_url", "/releases{/id}"),
            ("stargazers_url", "/stargazers"),
            ("statuses_url", "/statuses/{sha}"),
            ("subscribers_url", "/subscribers"),
            ("subscription_url", "/subscription"),
            ("tags_url", "/tags"),
            ("teams_url", "/teams"),
            ("trees_url", "/git/trees{/sha}"),
        ];
        if let Value::Object(m) = &mut v {
            for (key, rest) in templates {
                m.insert(key.into(), json!(format!("{api}{rest}")));
            }
        }
        if self.webhook {
            merge(
                &mut v,
                json!({ "custom_properties": {}, "web_commit_signoff_required": false }),
            );
        } else if full {
            merge(
                &mut v,
                json!({ "network_count": 0, "subscribers_count": 0 }),
            );
        }
        v
    }

    fn milestone(&self) -> Value {
        Value::Null
    }

    /// Labels, as GitHub shows them on an issue and in `…/labels` answers.
    pub(crate) fn labels(&self, names: &[String]) -> Vec<Value> {
        names
            .iter()
            .map(|l| {
                json!({
                    "id": ids::label(l),
                    "node_id": format!("LA_{l}"),
                    "url": self.api(&format!("/labels/{}", super::rest::path_segment(l))),
                    "name": l,
                    "description": Value::Null,
                    "color": "ededed",
                    "default": false,
                })
            })
            .collect()
    }

    fn issue_common(&self, n: u64, kind_path: &str) -> Value {
        json!({
            "url": self.api(&format!("/issues/{n}")),
            "repository_url": self.api(""),
            "labels_url": self.api(&format!("/issues/{n}/labels{{/name}}")),
            "comments_url": self.api(&format!("/issues/{n}/comments")),
            "events_url": self.api(&format!("/issues/{n}/events")),
            "html_url": self.web(&format!("/{kind_path}/{n}")),
            "number": n,
            "assignee": Value::Null,
            "assignees": [],
            "milestone": self.milestone(),
            "locked": false,
            "active_lock_reason": Value::Null,
        })
    }

    /// What issue `i` is blocked by and blocks (open ones, and all).
    fn dependencies(&self, i: &IssueSeed) -> Value {
        let open = |n: &u64| (self.st.issue(*n)).is_some_and(|b| b.state != SeedState::Closed);
        let blocking: Vec<u64> = (self.st.issues.iter())
            .filter(|b| b.blocked_by.contains(&i.number))
            .map(|b| b.number)
            .collect();
        json!({
            "blocked_by": i.blocked_by.iter().filter(|n| open(n)).count(),
            "blocking": blocking.iter().filter(|n| open(n)).count(),
            "total_blocked_by": i.blocked_by.len(),
            "total_blocking": blocking.len(),
        })
    }

    /// An issue as the issues API shows it (and webhooks, but for `closed_by`).
    pub(crate) fn issue(&self, i: &IssueSeed) -> Value {
        let n = i.number;
        let closed = i.state == SeedState::Closed;
        let mut v = self.issue_common(n, "issues");
        merge(
            &mut v,
            json!({
                "id": ids::issue_id(n),
                "node_id": ids::issue(n),
                "title": i.title,
                "body": i.body,
                "user": self.user(&i.author),
                "labels": self.labels(&i.labels),
                "state": if closed { "closed" } else { "open" },
                "state_reason": i.state_reason,
                "comments": i.comments.len(),
                "author_association": self.association(&i.author),
                "created_at": time(i.created_at),
                "updated_at": time(i.updated_at.or(i.created_at)),
                "closed_at": if closed { json!(time(i.updated_at.or(i.created_at))) } else { Value::Null },
                "reactions": self.reactions(&format!("/issues/{n}/reactions")),
                "timeline_url": self.api(&format!("/issues/{n}/timeline")),
                "performed_via_github_app": Value::Null,
            }),
        );
        if !self.webhook {
            // A sub-issue names its parent: `{repository_url}/issues/{parent}`.
            let parent = (self.st.parent_of(n)).map(|p| self.api(&format!("/issues/{p}")));
            merge(
                &mut v,
                json!({
                    "closed_by": Value::Null,
                    "parent_issue_url": parent,
                    "issue_dependencies_summary": self.dependencies(i),
                }),
            );
        }
        v
    }

    /// A pull request as the issues API shows it.
    pub(crate) fn pull_as_issue(&self, p: &PullSeed) -> Value {
        let n = p.number;
        let open = p.state == SeedState::Open && !p.merged;
        let mut v = self.issue_common(n, "pull");
        merge(
            &mut v,
            json!({
                "id": ids::issue_id(n),
                "node_id": ids::pull(n),
                "title": p.title,
                "body": p.body,
                "user": self.user(&p.author),
                "labels": [],
                "state": if open { "open" } else { "closed" },
                "comments": 0,
                "author_association": self.association(&p.author),
                "created_at": time(p.created_at),
                "updated_at": time(p.created_at),
                "closed_at": Value::Null,
                "draft": p.draft,
                "reactions": self.reactions(&format!("/issues/{n}/reactions")),
                "timeline_url": self.api(&format!("/issues/{n}/timeline")),
                "performed_via_github_app": Value::Null,
                "pull_request": {
                    "url": self.api(&format!("/pulls/{n}")),
                    "html_url": self.web(&format!("/pull/{n}")),
                    "diff_url": self.web(&format!("/pull/{n}.diff")),
                    "patch_url": self.web(&format!("/pull/{n}.patch")),
                    "merged_at": Value::Null,
                },
            }),
        );
        v
    }

    fn reactions(&self, rest: &str) -> Value {
        json!({
            "url": self.api(rest), "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "confused": 0,
            "heart": 0, "hooray": 0, "eyes": 0, "rocket": 0,
        })
    }

    pub(crate) fn comment(&self, issue: u64, c: &CommentSeed) -> Value {
        json!({
            "id": c.id,
            "node_id": ids::comment(c.id),
            "url": self.api(&format!("/issues/comments/{}", c.id)),
            "html_url": self.web(&format!("/issues/{issue}#issuecomment-{}", c.id)),
            "body": c.body,
            "user": self.user(&c.author),
            "author_association": self.association(&c.author),
            "created_at": time(c.created_at),
            "updated_at": time(c.updated_at.or(c.created_at)),
            "issue_url": self.api(&format!("/issues/{issue}")),
            "reactions": self.reactions(&format!("/issues/comments/{}/reactions", c.id)),
            "performed_via_github_app": Value::Null,
        })
    }

    /// A submitted (or pending) review of pull request `n`.
    pub(crate) fn review(&self, n: u64, r: &ReviewSeed) -> Value {
        let html = self.web(&format!("/pull/{n}#pullrequestreview-{}", r.id));
        let pull = self.api(&format!("/pulls/{n}"));
        json!({
            "id": r.id,
            "node_id": format!("PRR_{}", r.id),
            "user": self.user(&r.author),
            "body": r.body,
            "state": r.state,
            "html_url": html,
            "pull_request_url": pull,
            "author_association": self.association(&r.author),
            "submitted_at": (r.state != "PENDING").then(|| time(r.submitted_at)),
            "commit_id": r.commit_id,
            "_links": { "html": { "href": html }, "pull_request": { "href": pull } },
        })
    }

    /// A line comment of pull request `p`: its `line` and `position` are where the line stands
    /// on the pull request's head now, `original_line` and `original_position` where it was
    /// commented on. Once a later commit changed the line (the comment is outdated) it has no
    /// `line` or `position`: webhooks say `null`, the REST API leaves them out (its description
    /// types them as integers).
    pub(crate) fn review_comment(
        &self,
        git: &GitRemote,
        p: &PullSeed,
        c: &ReviewCommentSeed,
    ) -> Value {
        let n = p.number;
        let (line, commit_id) = match (current_line(git, p, c), git.branch_sha(&p.head)) {
            (Some(line), Some(head)) => (Some(line), Some(head)),
            (line, _) => (line, c.commit_id.clone()),
        };
        let original = c.commit_id.as_deref().unwrap_or(&p.head);
        let at = |commit: &str, line: Option<u64>| {
            line.and_then(|l| git.diff_position(&p.base, commit, &c.path, l))
        };
        let position = commit_id.as_deref().and_then(|head| at(head, line));
        let original_position = at(original, c.line);
        let url = self.api(&format!("/pulls/comments/{}", c.id));
        let html = self.web(&format!("/pull/{n}#discussion_r{}", c.id));
        let pull = self.api(&format!("/pulls/{n}"));
        let mut v = json!({
            "url": url,
            "pull_request_review_id": c.review_id,
            "id": c.id,
            "node_id": format!("PRRC_{}", c.id),
            "diff_hunk": c.diff_hunk,
            "path": c.path,
            "commit_id": commit_id.unwrap_or_default(),
            "original_commit_id": c.commit_id.clone().unwrap_or_default(),
            "user": self.user(&c.author),
            "body": c.body,
            "created_at": time(c.created_at),
            "updated_at": time(c.created_at),
            "html_url": html,
            "pull_request_url": pull,
            "author_association": self.association(&c.author),
            "line": line,
            "original_line": c.line,
            "position": position,
            "original_position": original_position,
            "start_line": Value::Null,
            "original_start_line": Value::Null,
            "start_side": Value::Null,
            "side": "RIGHT",
            "subject_type": "line",
            "_links": { "self": { "href": url }, "html": { "href": html }, "pull_request": { "href": pull } },
            "reactions": self.reactions(&format!("/pulls/comments/{}/reactions", c.id)),
        });
        if let Some(parent) = c.in_reply_to {
            v["in_reply_to_id"] = json!(parent);
        }
        if !self.webhook {
            for key in ["line", "position", "original_line", "original_position"] {
                if v[key].is_null() {
                    remove(&mut v, &[key]);
                }
            }
        }
        v
    }

    /// A pull request; `mergeable` is `None` while GitHub would still be computing it.
    pub(super) fn pull(&self, git: &GitRemote, p: &PullSeed, known: bool) -> Value {
        let n = p.number;
        let open = p.state == SeedState::Open && !p.merged;
        let (mergeable, mergeable_state) = if open && known {
            match git.mergeability(&p.base, &p.head) {
                Mergeability::Clean if p.draft => (json!(true), "draft"),
                Mergeability::Clean => (json!(true), "clean"),
                Mergeability::Conflicting => (json!(false), "dirty"),
                Mergeability::Unknown => (Value::Null, "unknown"),
            }
        } else {
            (Value::Null, "unknown")
        };
        let owner = &self.st.repo.owner;
        let side = |branch: &str| {
            json!({
                "label": format!("{owner}:{branch}"),
                "ref": branch,
                "sha": git.branch_sha(branch).unwrap_or_default(),
                "user": self.user(owner),
                "repo": self.repository(false),
            })
        };
        let api = self.api(&format!("/pulls/{n}"));
        let statuses = self.api(&format!(
            "/statuses/{}",
            git.branch_sha(&p.head).unwrap_or_default()
        ));
        let links: serde_json::Map<String, Value> = [
            ("self", api.clone()),
            ("html", self.web(&format!("/pull/{n}"))),
            ("issue", self.api(&format!("/issues/{n}"))),
            ("comments", self.api(&format!("/issues/{n}/comments"))),
            ("review_comments", format!("{api}/comments")),
            ("review_comment", self.api("/pulls/comments{/number}")),
            ("commits", format!("{api}/commits")),
            ("statuses", statuses.clone()),
        ]
        .into_iter()
        .map(|(k, href)| (k.to_string(), json!({ "href": href })))
        .collect();
        let mut v = json!({
            "url": api,
            "id": ids::pull_id(n),
            "node_id": ids::pull(n),
            "html_url": self.web(&format!("/pull/{n}")),
            "diff_url": self.web(&format!("/pull/{n}.diff")),
            "patch_url": self.web(&format!("/pull/{n}.patch")),
            "issue_url": self.api(&format!("/issues/{n}")),
            "commits_url": format!("{api}/commits"),
            "review_comments_url": format!("{api}/comments"),
            "review_comment_url": self.api("/pulls/comments{/number}"),
            "comments_url": self.api(&format!("/issues/{n}/comments")),
            "statuses_url": statuses,
            "number": n,
            "state": if open { "open" } else { "closed" },
            "locked": false,
            "title": p.title,
            "user": self.user(&p.author),
            "body": p.body,
            "labels": [],
            "milestone": Value::Null,
            "active_lock_reason": Value::Null,
            "created_at": time(p.created_at),
            "updated_at": time(p.created_at),
            "closed_at": p.merge.as_ref().map_or(Value::Null, |m| json!(time(Some(m.at)))),
            "merged_at": p.merge.as_ref().map_or(Value::Null, |m| json!(time(Some(m.at)))),
            "merge_commit_sha": p.merge.as_ref().map_or(Value::Null, |m| json!(m.sha)),
            "assignee": Value::Null,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": side(&p.head),
            "base": side(&p.base),
            "_links": links,
            "author_association": self.association(&p.author),
            "auto_merge": Value::Null,
            "draft": p.draft,
        });
        merge(
            &mut v,
            json!({
                "merged": p.merged,
                "mergeable": mergeable,
                "rebaseable": mergeable,
                "mergeable_state": mergeable_state,
                "merged_by": p.merge.as_ref().map_or(Value::Null, |m| self.user(&m.by)),
                "comments": 0,
                "review_comments": 0,
                "maintainer_can_modify": false,
                "commits": 1,
                "additions": 0,
                "deletions": 0,
                "changed_files": 0,
            }),
        );
        v
    }

    /// The App whose check runs the sandbox reports (GitHub Actions on github.com).
    fn checks_app(&self) -> Value {
        let created = iso(DateTime::from_timestamp(1_500_000_000, 0).unwrap_or_default());
        json!({
            "id": 15368,
            "slug": "github-actions",
            "node_id": "MDM6QXBwMTUzNjg=",
            "owner": self.user("github"),
            "name": "GitHub Actions",
            "description": "Automate your workflow from idea to production",
            "external_url": "https://help.github.com/en/actions",
            "html_url": format!("{}/apps/github-actions", self.origin.web),
            "created_at": created,
            "updated_at": created,
            "permissions": {"checks": "write", "contents": "write", "metadata": "read"},
            "events": ["check_run", "check_suite", "push"],
        })
    }

    /// A check run of commit `head_sha`, started at `started` and, when completed, done a minute
    /// later (fixed times keep the list's ETag stable while nothing changes).
    pub(crate) fn check_run(
        &self,
        head_sha: &str,
        index: usize,
        r: &CheckRunSeed,
        started: DateTime<Utc>,
    ) -> Value {
        let id = u64::from(ids::fnv(&format!("{head_sha}/{}", r.name))) + index as u64;
        let completed = r.status == "completed";
        let done = iso(started + chrono::Duration::minutes(1));
        let started = iso(started);
        let html = r
            .html_url
            .clone()
            .unwrap_or_else(|| self.web(&format!("/runs/{id}")));
        json!({
            "id": id,
            "head_sha": head_sha,
            "node_id": format!("CR_{id}"),
            "external_id": "",
            "url": self.api(&format!("/check-runs/{id}")),
            "html_url": html,
            "details_url": html,
            "status": r.status,
            "conclusion": r.conclusion,
            "started_at": started,
            "completed_at": if completed { json!(done) } else { Value::Null },
            "output": {
                "title": Value::Null,
                "summary": Value::Null,
                "text": Value::Null,
                "annotations_count": 0,
                "annotations_url": self.api(&format!("/check-runs/{id}/annotations")),
            },
            "name": r.name,
            "check_suite": { "id": u64::from(ids::fnv(head_sha)) },
            "app": self.checks_app(),
            "pull_requests": [],
        })
    }

    /// A commit as `GET /repos/{owner}/{repo}/commits/{ref}` shows it (without its files).
    pub(crate) fn commit(&self, c: &CommitInfo) -> Value {
        let date = iso(DateTime::from_timestamp(c.time, 0).unwrap_or_default());
        let git_user = json!({"name": c.author, "email": c.email, "date": date});
        json!({
            "sha": c.sha,
            "node_id": format!("C_{}", c.sha),
            "url": self.api(&format!("/commits/{}", c.sha)),
            "html_url": self.web(&format!("/commit/{}", c.sha)),
            "comments_url": self.api(&format!("/commits/{}/comments", c.sha)),
            "commit": {
                "url": self.api(&format!("/git/commits/{}", c.sha)),
                "author": git_user,
                "committer": git_user,
                "message": c.message,
                "comment_count": 0,
                "tree": { "sha": c.sha, "url": self.api(&format!("/git/trees/{}", c.sha)) },
            },
            "author": Value::Null,
            "committer": Value::Null,
            "parents": c.parents.iter().map(|p| json!({
                "sha": p,
                "url": self.api(&format!("/commits/{p}")),
                "html_url": self.web(&format!("/commit/{p}")),
            })).collect::<Vec<_>>(),
            "stats": { "additions": 0, "deletions": 0, "total": 0 },
            "files": [],
        })
    }

    /// A git reference (`refs/heads/main`) at commit `sha`, as `GET /git/ref/{ref}` shows it.
    pub(crate) fn git_ref(&self, name: &str, sha: &str) -> Value {
        json!({
            "ref": name,
            "node_id": format!("REF_{:08x}", ids::fnv(name)),
            "url": self.api(&format!("/git/{name}")),
            "object": {
                "type": "commit",
                "sha": sha,
                "url": self.api(&format!("/git/commits/{sha}")),
            },
        })
    }

    /// A file a pull request changes, as `GET /pulls/{number}/files` lists it; `head_sha` is the
    /// commit its URLs point at.
    pub(crate) fn diff_entry(&self, head_sha: &str, f: &FileDiff) -> Value {
        let path = f
            .path
            .split('/')
            .map(super::rest::path_segment)
            .collect::<Vec<_>>()
            .join("/");
        let mut entry = json!({
            "sha": f.sha,
            "filename": f.path,
            "status": f.status,
            "additions": f.additions,
            "deletions": f.deletions,
            "changes": f.additions + f.deletions,
            "blob_url": self.web(&format!("/blob/{head_sha}/{path}")),
            "raw_url": self.web(&format!("/raw/{head_sha}/{path}")),
            "contents_url": self.api(&format!("/contents/{path}?ref={head_sha}")),
        });
        if let Some(patch) = f.patch() {
            entry["patch"] = json!(patch);
        }
        if let Some(old) = &f.old_path {
            entry["previous_filename"] = json!(old);
        }
        entry
    }

    /// The App's installation on the repository's owner.
    pub(crate) fn installation(&self, app: &AppSeed) -> Value {
        let created = iso(DateTime::from_timestamp(1_600_000_000, 0).unwrap_or_default());
        let owner = &self.st.repo.owner;
        json!({
            "id": app.installation_id,
            "account": self.user(owner),
            "repository_selection": "all",
            "access_tokens_url": format!("{}/app/installations/{}/access_tokens", self.origin.api, app.installation_id),
            "repositories_url": format!("{}/installation/repositories", self.origin.api),
            "html_url": format!("{}/settings/installations/{}", self.origin.web, app.installation_id),
            "app_id": app.app_id,
            "app_slug": app.slug,
            "target_id": ids::user(owner),
            "target_type": if self.st.is_org(owner) { "Organization" } else { "User" },
            "permissions": app.token_permissions(),
            "events": [],
            "created_at": created,
            "updated_at": created,
            "single_file_name": Value::Null,
            "has_multiple_single_files": false,
            "single_file_paths": [],
            "suspended_by": Value::Null,
            "suspended_at": Value::Null,
        })
    }

    /// The App itself (`GET /app` with its JWT).
    pub(crate) fn app(&self, app: &AppSeed) -> Value {
        let created = iso(DateTime::from_timestamp(1_600_000_000, 0).unwrap_or_default());
        json!({
            "id": app.app_id,
            "slug": app.slug,
            "node_id": format!("A_{}", app.app_id),
            "client_id": format!("Iv1.{:016x}", app.app_id),
            "owner": self.user(&self.st.repo.owner),
            "name": app.slug,
            "description": Value::Null,
            "external_url": format!("{}/apps/{}", self.origin.web, app.slug),
            "html_url": format!("{}/apps/{}", self.origin.web, app.slug),
            "created_at": created,
            "updated_at": created,
            "permissions": app.token_permissions(),
            "events": [],
            "installations_count": 1,
        })
    }
}

/// Add the fields of `extra` to `base`.
fn merge(base: &mut Value, extra: Value) {
    if let (Value::Object(b), Value::Object(e)) = (base, extra) {
        b.extend(e);
    }
}

/// `value` without `keys`.
pub(crate) fn remove(value: &mut Value, keys: &[&str]) {
    if let Value::Object(m) = value {
        for k in keys {
            m.remove(*k);
        }
    }
}
