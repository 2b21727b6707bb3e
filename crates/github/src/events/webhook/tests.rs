//! Against GitHub's published example payloads (tests/fixtures/webhooks, vendored by
//! scripts/vendor-webhook-examples.sh). Where a case needs a payload the examples lack (a command in
//! a comment, a card of an issue, the newer `from`/`to` members), the published example is changed
//! in the one place named, in members GitHub's published schema declares (checked below).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn fixtures() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/fixtures/webhooks")
}

fn fixture(name: &str) -> Value {
    let bytes = std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_slice(&bytes).unwrap()
}

fn schemas() -> Value {
    fixture("schemas.json")["schemas"].clone()
}

/// Every vendored example: (file name, event type, bytes).
fn examples() -> Vec<(String, String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| !p.ends_with("schemas.json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let event = name.split('.').next().unwrap().to_string();
            (name, event, std::fs::read(&p).unwrap())
        })
        .collect();
    all.sort();
    all
}

fn options() -> WebhookOptions {
    WebhookOptions {
        trigger_label: Some("bug".into()),
        ..WebhookOptions::default()
    }
}

fn parse(event: &str, payload: &Value) -> Parsed {
    let body = serde_json::to_vec(payload).unwrap();
    parse_webhook(event, "d-1", &body, &options()).unwrap()
}

fn events(parsed: Parsed) -> Vec<Event> {
    match parsed {
        Parsed::Events(events) => events,
        other => panic!("expected events, got {other:?}"),
    }
}

/// The one event a delivery asks for.
fn one(parsed: Parsed) -> Event {
    let mut all = events(parsed);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

fn ignored_reason(parsed: Parsed) -> String {
    match parsed {
        Parsed::Ignored(reason) => reason,
        other => panic!("expected it ignored, got {other:?}"),
    }
}

fn origin() -> Origin {
    Origin::Webhook {
        delivery: "d-1".into(),
    }
}

#[test]
fn every_published_example_is_read_and_answered() {
    let all = examples();
    assert_eq!(all.len(), 37, "the vendored set changed: update this test");
    for (name, event, body) in all {
        let parsed = parse_webhook(&event, "d-1", &body, &options())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let action = name.split('.').nth(1).unwrap();
        let expect_events = match (event.as_str(), action) {
            ("ping", _) => true,
            ("issues", "labeled") => true,
            ("pull_request_review", "submitted") => true,
            ("pull_request_review_comment", "created") => true,
            // The examples' comments hold no command and are on issues; the only `edited` card
            // example holds a draft issue.
            _ => false,
        };
        match parsed {
            Parsed::Events(events) => {
                assert!(expect_events, "{name}: {events:?}");
                assert_eq!(events.len(), 1, "{name}");
                assert_eq!(events[0].origin(), origin(), "{name}");
            }
            Parsed::Ignored(reason) => {
                assert!(!expect_events, "{name} ignored: {reason}");
                assert!(!reason.is_empty());
            }
            Parsed::UnknownEventType => panic!("{name}: unknown"),
        }
    }
}

// --- projects_v2_item -------------------------------------------------------------------------

/// The published `edited` example, a draft issue's card.
fn card_edit() -> Value {
    fixture("projects_v2_item.edited.0.json")
}

/// The same card holding an issue (`content_type` is one of the schema's enum, checked below).
fn issue_card_edit() -> Value {
    let mut payload = card_edit();
    payload["projects_v2_item"]["content_type"] = json!("Issue");
    payload["projects_v2_item"]["content_node_id"] = json!("I_kwDOAWcTxs5ABCDE");
    payload
}

fn option(id: &str, name: &str) -> Value {
    json!({ "id": id, "name": name, "color": "GRAY", "description": null })
}

/// An issue card's status edit in the newer shape: `field_name`, `project_number`, `from`, `to`.
fn status_change(from: Value, to: Value) -> Value {
    let mut payload = issue_card_edit();
    let field = &mut payload["changes"]["field_value"];
    field["field_name"] = json!("Status");
    field["project_number"] = json!(3);
    field["from"] = from;
    field["to"] = to;
    payload
}

#[test]
fn a_draft_issue_card_is_ignored() {
    let reason = ignored_reason(parse("projects_v2_item", &card_edit()));
    assert!(reason.contains("DraftIssue"), "{reason}");
    let mut pull = issue_card_edit();
    pull["projects_v2_item"]["content_type"] = json!("PullRequest");
    let reason = ignored_reason(parse("projects_v2_item", &pull));
    assert!(reason.contains("PullRequest"), "{reason}");
}

#[test]
fn a_status_edit_without_from_and_to_needs_a_board_lookup() {
    let events = events(parse("projects_v2_item", &issue_card_edit()));
    assert_eq!(
        events,
        vec![Event::CardMoved(CardMoved {
            origin: origin(),
            item_node_id: "PVTI_lADOAWcTxs07G84AVqWu".into(),
            board: BoardRef {
                node_id: "PVT_kwDOAWcTxs07Gw".into(),
                number: None,
                owner: Some("Octocoders".into()),
            },
            issue: IssueRef {
                node_id: "I_kwDOAWcTxs5ABCDE".into(),
                number: None,
            },
            field: FieldRef {
                node_id: "PVTF_lADOAWcTxs07G84AAali".into(),
                name: None,
            },
            columns: ColumnChange::NeedsLookup,
            moved_by: Actor {
                login: "wolfy1339".into(),
                association: None,
                is_bot: false,
            },
        })]
    );
    let shown = events[0].to_string();
    assert!(shown.contains("read from the board"), "{shown}");
}

#[test]
fn a_status_edit_with_from_and_to_names_both_columns() {
    let payload = status_change(
        option("f75ad846", "Backlog"),
        option("47fc9ee4", "Research"),
    );
    let Event::CardMoved(moved) = one(parse("projects_v2_item", &payload)) else {
        panic!("a card move");
    };
    assert_eq!(
        moved.columns,
        ColumnChange::Known {
            from: Some(Column {
                option_id: "f75ad846".into(),
                name: "Backlog".into()
            }),
            to: Some(Column {
                option_id: "47fc9ee4".into(),
                name: "Research".into()
            }),
        }
    );
    assert_eq!(moved.board.number, Some(3));
    assert_eq!(moved.field.name.as_deref(), Some("Status"));
    assert_eq!(
        Event::CardMoved(moved).to_string(),
        "card of an issue moved from Backlog to Research on board #3 by wolfy1339"
    );

    // A card whose status was cleared, or that had none.
    let cleared = status_change(option("47fc9ee4", "Research"), Value::Null);
    let Event::CardMoved(moved) = one(parse("projects_v2_item", &cleared)) else {
        panic!("a card move");
    };
    assert!(matches!(
        moved.columns,
        ColumnChange::Known {
            from: Some(_),
            to: None
        }
    ));

    // `from`/`to` in a shape that is not an option: the board decides.
    let odd = status_change(json!("Backlog"), json!(7));
    let Event::CardMoved(moved) = one(parse("projects_v2_item", &odd)) else {
        panic!("a card move");
    };
    assert_eq!(moved.columns, ColumnChange::NeedsLookup);
}

#[test]
fn edits_of_other_fields_and_other_actions_are_ignored() {
    let mut priority = status_change(option("a", "P1"), option("b", "P2"));
    priority["changes"]["field_value"]["field_name"] = json!("Priority");
    let reason = ignored_reason(parse("projects_v2_item", &priority));
    assert!(reason.contains("`Priority`"), "{reason}");

    let mut text_field = issue_card_edit();
    text_field["changes"]["field_value"]["field_type"] = json!("text");
    let reason = ignored_reason(parse("projects_v2_item", &text_field));
    assert!(reason.contains("text field"), "{reason}");

    let mut body_edit = issue_card_edit();
    body_edit["changes"] = json!({ "body": { "from": "a", "to": "b" } });
    ignored_reason(parse("projects_v2_item", &body_edit));

    for action in ["archived", "converted", "created", "reordered", "restored"] {
        let payload = fixture(&format!("projects_v2_item.{action}.0.json"));
        let reason = ignored_reason(parse("projects_v2_item", &payload));
        assert!(reason.contains(action), "{reason}");
    }
}

#[test]
fn the_members_added_to_examples_are_in_githubs_schema() {
    let schemas = schemas();
    let edited = &schemas["webhook-projects-v2-item-edited"];
    let field_value = &edited["properties"]["changes"]["oneOf"][0]["properties"]["field_value"];
    let declared = field_value["properties"].as_object().unwrap();
    let payload = status_change(option("x", "Backlog"), option("y", "Research"));
    for key in payload["changes"]["field_value"]
        .as_object()
        .unwrap()
        .keys()
    {
        assert!(
            declared.contains_key(key),
            "field_value.{key} is not in the schema"
        );
    }
    // from/to may be a single-select option, whose required and known members we send.
    let refs: Vec<&str> = field_value["properties"]["to"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["$ref"].as_str())
        .collect();
    assert!(refs.contains(&"#/components/schemas/projects-v2-single-select-option"));
    let select = &schemas["projects-v2-single-select-option"];
    let option = option("x", "Backlog");
    for required in select["required"].as_array().unwrap() {
        assert!(option.get(required.as_str().unwrap()).is_some());
    }
    for key in option.as_object().unwrap().keys() {
        assert!(select["properties"].get(key).is_some(), "option.{key}");
    }
    let content_types = &schemas["projects-v2-item-content-type"]["enum"];
    for kind in ["Issue", "PullRequest", "DraftIssue"] {
        assert!(
            content_types.as_array().unwrap().contains(&json!(kind)),
            "{kind}"
        );
    }
    // A comment on a pull request's conversation: its issue has a `pull_request` member.
    let pull_request = &schemas["webhook-issue-comment-created.issue.pull_request"]["properties"];
    for key in pr_marker().as_object().unwrap().keys() {
        assert!(pull_request.get(key).is_some(), "issue.pull_request.{key}");
    }
}

#[test]
fn author_associations_are_githubs() {
    let schemas = schemas();
    let mut published: Vec<&str> = schemas["author-association"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    published.sort_unstable();
    let mut ours: Vec<&str> = [
        AuthorAssociation::Owner,
        AuthorAssociation::Member,
        AuthorAssociation::Collaborator,
        AuthorAssociation::Contributor,
        AuthorAssociation::FirstTimer,
        AuthorAssociation::FirstTimeContributor,
        AuthorAssociation::Mannequin,
        AuthorAssociation::None,
    ]
    .iter()
    .map(|a| {
        let parsed: AuthorAssociation = serde_json::from_value(json!(a.as_str())).unwrap();
        assert_eq!(&parsed, a);
        a.as_str()
    })
    .collect();
    ours.sort_unstable();
    assert_eq!(ours, published);
    let later: AuthorAssociation = serde_json::from_value(json!("SOMETHING_NEW")).unwrap();
    assert_eq!(later, AuthorAssociation::Unknown);
    assert!(!later.is_owner_member_or_collaborator());
}

// --- issue_comment ----------------------------------------------------------------------------

fn pr_marker() -> Value {
    json!({
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
        "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
        "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        "merged_at": null
    })
}

/// The published `created` example with `body` as the comment.
fn comment(body: &str) -> Value {
    let mut payload = fixture("issue_comment.created.0.json");
    payload["comment"]["body"] = json!(body);
    payload
}

fn codertocat(association: AuthorAssociation) -> Actor {
    Actor {
        login: "Codertocat".into(),
        association: Some(association),
        is_bot: false,
    }
}

#[test]
fn a_comment_command_names_its_author_and_association() {
    let payload = comment("Ready now.\n/supervisor run");
    let events = events(parse("issue_comment", &payload));
    assert_eq!(
        events,
        vec![Event::Command(CommentCommand {
            origin: origin(),
            repository: RepoSlug::parse("Codertocat/Hello-World").unwrap(),
            target: Target::Issue(1),
            comment_id: payload["comment"]["id"].as_u64().unwrap(),
            author: codertocat(AuthorAssociation::Owner),
            sender: Actor {
                association: None,
                ..codertocat(AuthorAssociation::Owner)
            },
            edited: false,
            command: Ok(Command::Run),
        })]
    );
    let Event::Command(command) = &events[0] else {
        unreachable!()
    };
    assert!(command.author.is_owner_member_or_collaborator());
}

#[test]
fn a_stranger_s_command_is_read_with_its_association() {
    let mut payload = comment("/supervisor run");
    payload["comment"]["author_association"] = json!("NONE");
    payload["comment"]["user"]["login"] = json!("stranger");
    let Event::Command(command) = one(parse("issue_comment", &payload)) else {
        panic!("a command");
    };
    assert_eq!(command.author.login, "stranger");
    assert_eq!(command.author.association, Some(AuthorAssociation::None));
    assert!(!command.author.is_owner_member_or_collaborator());
    assert_eq!(
        Event::Command(command).to_string(),
        "command `run` on issue #1 in Codertocat/Hello-World by stranger (NONE)"
    );
}

#[test]
fn an_epic_command_is_read_on_an_issue_with_its_authors_association() {
    let payload = comment("This is too big for one pull request.\n\n/supervisor epic");
    let Event::Command(command) = one(parse("issue_comment", &payload)) else {
        panic!("a command");
    };
    assert_eq!(command.command, Ok(Command::Epic));
    assert_eq!(command.target, Target::Issue(1));
    assert_eq!(command.author, codertocat(AuthorAssociation::Owner));

    // A stranger's is read as well, named as a stranger's: who may ask is decided later.
    let mut payload = comment("/supervisor epic");
    payload["comment"]["author_association"] = json!("NONE");
    payload["comment"]["user"]["login"] = json!("stranger");
    let Event::Command(command) = one(parse("issue_comment", &payload)) else {
        panic!("a command");
    };
    assert_eq!(command.command, Ok(Command::Epic));
    assert!(!command.author.is_owner_member_or_collaborator());
    assert_eq!(
        Event::Command(command).to_string(),
        "command `epic` on issue #1 in Codertocat/Hello-World by stranger (NONE)"
    );

    // Malformed: arguments it does not take.
    let payload = comment("/supervisor epic please, in 3 tasks");
    let Event::Command(command) = one(parse("issue_comment", &payload)) else {
        panic!("a command");
    };
    assert_eq!(
        command.command,
        Err(CommandError::UnexpectedArguments {
            command: "epic".into(),
            rest: "please, in 3 tasks".into()
        })
    );
}

#[test]
fn several_and_unknown_commands_each_become_an_event() {
    let payload = comment("/supervisor status\n\n```\n/supervisor stop\n```\n\n/supervisor dance");
    let commands: Vec<_> = events(parse("issue_comment", &payload))
        .into_iter()
        .map(|e| match e {
            Event::Command(c) => c.command,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        commands,
        vec![
            Ok(Command::Status),
            Err(CommandError::Unknown {
                word: "dance".into()
            })
        ]
    );
}

#[test]
fn comments_on_pull_requests_name_the_pull_request() {
    let mut payload = comment("/supervisor revise use the builder");
    payload["issue"]["pull_request"] = pr_marker();
    let Event::Command(command) = one(parse("issue_comment", &payload)) else {
        panic!("a command");
    };
    assert_eq!(command.target, Target::PullRequest(1));
    assert_eq!(
        command.command,
        Ok(Command::Revise {
            note: "use the builder".into()
        })
    );

    // Without a command, it is conversation for the review loop, with its author's association.
    let mut payload = fixture("issue_comment.created.0.json");
    payload["issue"]["pull_request"] = pr_marker();
    let Event::Review(review) = one(parse("issue_comment", &payload)) else {
        panic!("review activity");
    };
    assert_eq!(review.pull_request, 1);
    assert_eq!(review.author, codertocat(AuthorAssociation::Owner));
    assert!(matches!(review.kind, ReviewKind::Conversation { .. }));
    assert_eq!(
        review.body.as_deref(),
        payload["comment"]["body"].as_str(),
        "the body, for the loop to filter by author"
    );
}

#[test]
fn an_edit_yields_only_the_commands_it_added() {
    // The published edit example: body changed from one sentence to another.
    let payload = fixture("issue_comment.edited.0.json");
    assert!(ignored_reason(parse("issue_comment", &payload)).contains("added no command"));

    let mut added = payload.clone();
    added["comment"]["body"] = json!("/supervisor run");
    let Event::Command(command) = one(parse("issue_comment", &added)) else {
        panic!("a command");
    };
    assert!(command.edited);
    assert_eq!(command.sender.login, "Codertocat");

    let mut kept = payload.clone();
    kept["comment"]["body"] = json!("/supervisor run\n\nTypo fixed.");
    kept["changes"]["body"]["from"] = json!("/supervisor run\n\nTypo fxed.");
    ignored_reason(parse("issue_comment", &kept));

    let mut fixed = payload;
    fixed["comment"]["body"] = json!("/supervisor run");
    fixed["changes"]["body"]["from"] = json!("/supervisor rnu");
    assert_eq!(events(parse("issue_comment", &fixed)).len(), 1);
}

#[test]
fn deleted_comments_are_ignored() {
    let payload = fixture("issue_comment.deleted.0.json");
    assert!(ignored_reason(parse("issue_comment", &payload)).contains("deleted"));
}

// --- issues, reviews, ping --------------------------------------------------------------------

#[test]
fn the_trigger_label_asks_for_a_run() {
    let payload = fixture("issues.labeled.0.json");
    let Event::IssueLabeled(labeled) = one(parse("issues", &payload)) else {
        panic!("a label");
    };
    assert_eq!(labeled.label, "bug");
    assert_eq!(labeled.issue, 1);
    assert_eq!(labeled.issue_node_id, "MDU6SXNzdWU0NDQ1MDAwNDE=");
    assert_eq!(labeled.labeled_by.login, "Codertocat");
    assert_eq!(labeled.issue_author, codertocat(AuthorAssociation::Owner));

    let body = serde_json::to_vec(&payload).unwrap();
    let other = WebhookOptions {
        trigger_label: Some("supervisor".into()),
        ..WebhookOptions::default()
    };
    let reason = ignored_reason(parse_webhook("issues", "d", &body, &other).unwrap());
    assert!(
        reason.contains("not the trigger label `supervisor`"),
        "{reason}"
    );
    let none = WebhookOptions::default();
    let reason = ignored_reason(parse_webhook("issues", "d", &body, &none).unwrap());
    assert!(reason.contains("no trigger label"), "{reason}");
    let upper = WebhookOptions {
        trigger_label: Some("BUG".into()),
        ..WebhookOptions::default()
    };
    assert!(matches!(
        parse_webhook("issues", "d", &body, &upper).unwrap(),
        Parsed::Events(_)
    ));
    // The epics' label asks for a planning, trigger label or not.
    let epic = WebhookOptions {
        epic_label: Some("Bug".into()),
        ..WebhookOptions::default()
    };
    assert!(matches!(
        parse_webhook("issues", "d", &body, &epic).unwrap(),
        Parsed::Events(_)
    ));
    for other_action in ["issues.unlabeled.0.json", "issues.opened.0.json"] {
        ignored_reason(parse("issues", &fixture(other_action)));
    }
}

#[test]
fn a_submitted_review_carries_state_author_and_body() {
    let payload = fixture("pull_request_review.submitted.0.json");
    let Event::Review(review) = one(parse("pull_request_review", &payload)) else {
        panic!("a review");
    };
    assert_eq!(review.pull_request, 2);
    assert_eq!(review.author, codertocat(AuthorAssociation::Owner));
    assert_eq!(
        review.kind,
        ReviewKind::Review {
            review_id: 237895671,
            state: ReviewState::Commented
        }
    );
    assert_eq!(review.body, None);

    let mut approved = payload;
    approved["review"]["state"] = json!("approved");
    approved["review"]["body"] = json!("LGTM");
    let Event::Review(review) = one(parse("pull_request_review", &approved)) else {
        panic!("a review");
    };
    assert!(matches!(
        review.kind,
        ReviewKind::Review {
            state: ReviewState::Approved,
            ..
        }
    ));
    assert_eq!(review.body.as_deref(), Some("LGTM"));

    let dismissed = fixture("pull_request_review.dismissed.0.json");
    ignored_reason(parse("pull_request_review", &dismissed));
}

#[test]
fn a_review_comment_names_its_place() {
    let payload = fixture("pull_request_review_comment.created.1.json");
    let Event::Review(review) = one(parse("pull_request_review_comment", &payload)) else {
        panic!("a review comment");
    };
    assert_eq!(
        review.kind,
        ReviewKind::ReviewComment {
            comment_id: 284312630,
            review_id: Some(237895671),
            path: "README.md".into(),
            line: Some(265),
        }
    );
    assert_eq!(
        review.body.as_deref(),
        Some("Maybe you should use more emoji on this line.")
    );
    // The older example has no `line`.
    let older = fixture("pull_request_review_comment.created.0.json");
    let Event::Review(review) = one(parse("pull_request_review_comment", &older)) else {
        panic!("a review comment");
    };
    assert!(matches!(
        review.kind,
        ReviewKind::ReviewComment { line: None, .. }
    ));
}

#[test]
fn a_ping_names_the_hook_and_its_events() {
    let Event::Ping(ping) = one(parse("ping", &fixture("ping.none.3.json"))) else {
        panic!("a ping");
    };
    assert!(ping.hook_id.is_some());
    assert!(ping.events.contains(&"repository".to_string()));
    let Event::Ping(ping) = one(parse("ping", &fixture("ping.none.0.json"))) else {
        panic!("a ping");
    };
    assert_eq!(ping.events, vec!["*"]);
}

// --- bad input --------------------------------------------------------------------------------

#[test]
fn unknown_event_types_are_named_as_such() {
    let body = serde_json::to_vec(&fixture("ping.none.0.json")).unwrap();
    for event in ["push", "pull_request", "", "ISSUES", "projects_v2"] {
        assert_eq!(
            parse_webhook(event, "d", &body, &options()).unwrap(),
            Parsed::UnknownEventType,
            "{event}"
        );
    }
}

#[test]
fn malformed_or_misshapen_payloads_are_errors_that_name_the_event() {
    for (event, body) in [
        ("issue_comment", &b"{not json"[..]),
        ("issue_comment", b""),
        ("ping", b"[1, 2]"),
        ("issue_comment", br#"{"action": "created"}"#),
        (
            "projects_v2_item",
            br#"{"action": "edited", "projects_v2_item": {}}"#,
        ),
        (
            "issues",
            br#"{"action": "labeled", "issue": {"number": "one"}}"#,
        ),
    ] {
        let error = parse_webhook(event, "d", body, &options()).unwrap_err();
        assert!(
            matches!(error, PayloadError::Json { .. }),
            "{event}: {error}"
        );
        assert!(error.to_string().contains(&format!("`{event}`")), "{error}");
    }
    let mut payload = comment("/supervisor run");
    payload["repository"]["full_name"] = json!("../../etc");
    let body = serde_json::to_vec(&payload).unwrap();
    let error = parse_webhook("issue_comment", "d", &body, &options()).unwrap_err();
    assert!(matches!(error, PayloadError::Invalid { .. }), "{error}");
}

const EVENT_TYPES: [&str; 7] = [
    "projects_v2_item",
    "issue_comment",
    "issues",
    "pull_request_review",
    "pull_request_review_comment",
    "ping",
    "push",
];

proptest! {
    #[test]
    fn no_body_panics(
        event in prop::sample::select(EVENT_TYPES.to_vec()),
        body in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let _ = parse_webhook(event, "d", &body, &options());
    }

    /// Published payloads with bytes changed, cut short or spliced: errors, never panics.
    #[test]
    fn no_damaged_example_panics(
        which in 0usize..37,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = examples();
        let (_, event, mut body) = all[which % all.len()].clone();
        for (at, byte) in edits {
            let i = at.index(body.len());
            body[i] = byte;
        }
        let keep = cut.index(body.len() + 1);
        body.truncate(keep.max(body.len() / 2));
        let _ = parse_webhook(&event, "d", &body, &options());
    }

    /// A comment of any text, in a real payload.
    #[test]
    fn no_comment_text_panics(text in any::<String>(), on_pull_request in any::<bool>()) {
        let mut payload = comment(&format!("/supervisor {text}"));
        if on_pull_request {
            payload["issue"]["pull_request"] = pr_marker();
        }
        let body = serde_json::to_vec(&payload).unwrap();
        // Whatever Markdown the text makes of the line, the payload is read.
        let parsed = parse_webhook("issue_comment", "d", &body, &options());
        prop_assert!(parsed.is_ok());
    }
}
