//! The machine when it revises a pull request (`RunOptions::revise`): admission reads the pull
//! request and its feedback, the work starts at the workflow's revision stage on the pull
//! request's branch, and approval answers the threads and rewrites the body instead of opening a
//! pull request. Everything else — stages, gates, scoring, budgets, journal, markers — is the run's.

use super::{Admitted, Machine, Reading, Want, admit, refuse, warning};
use crate::agent::Outcome;
use crate::config::BuiltIn;
use crate::events::CommandSyntax;
use crate::github::{Feedback, Issue};
use crate::github::{Marker, MarkerKind};
use crate::ids::{CommitSha, PrNumber};
use crate::pipeline::UserText;
use crate::pipeline::decide::Transition;
use crate::pipeline::decide::revision::{
    History, REVISION_STAGE, Reviewers, RevisionFeedback, feedback, history, refuse_pull,
};
use crate::pipeline::effects::Context;
use crate::pipeline::effects::{Effect, Text, ThreadAnswer, WorktreeInfo};
use crate::pipeline::journal::Event;
use crate::pipeline::summary::RunEnd;

/// The commit message of a revision's work.
pub(super) fn revision_commit_message(f: &RevisionFeedback, agent: &str, attempt: u32) -> String {
    format!(
        "Revise #{}: address review feedback, round {} ({agent} attempt {attempt})",
        f.pr, f.round
    )
}

impl Machine {
    /// Where comments go: the pull request when revising one, else the issue.
    pub(crate) fn post_target(&self) -> u64 {
        (self.opts.revise.map(PrNumber::get))
            .or_else(|| self.issue().map(|i| i.number))
            .unwrap_or(self.opts.issue.get())
    }

    fn reviewers<'a>(&'a self, owner: &'a dyn Fn(&str) -> bool) -> Reviewers<'a> {
        Reviewers {
            viewer: self.viewer(),
            run_id: &self.run_id,
            is_codeowner: owner,
            mention: &self.project.settings.revise_mention,
            // The prefix was checked when the settings were read.
            commands: CommandSyntax::new(&self.project.settings.watch.command_prefix)
                .unwrap_or_default(),
        }
    }

    fn revision_history(&self) -> Option<History> {
        let fb = self.feedback()?;
        let settings = &self.project.settings;
        let owner = |l: &str| settings.is_codeowner(l);
        Some(history(fb, &self.reviewers(&owner)))
    }

    /// The trusted feedback this revision works on (`None` when not revising).
    pub(super) fn revision_feedback(&self) -> Option<RevisionFeedback> {
        let fb = self.feedback()?;
        let settings = &self.project.settings;
        let owner = |l: &str| settings.is_codeowner(l);
        let who = self.reviewers(&owner);
        Some(feedback(fb, &who, &history(fb, &who)))
    }

    /// Admission of a revision: the pull request is supervisor's and open, there is trusted
    /// feedback, and `maxRevisions` is not reached.
    pub(super) fn want_revision_admission(
        &self,
        fb: &Feedback,
        issue: &Issue,
        context: &Context,
        reading: &Reading,
    ) -> Want {
        let ws = crate::workspace::WorkspaceConfig::from_settings(
            &self.project.root,
            &self.project.settings,
        );
        let branch = format!("{}{}", ws.branch_prefix, issue.number);
        let settings = &self.project.settings;
        let owner = |l: &str| settings.is_codeowner(l);
        if let Some(reason) = refuse_pull(fb, &self.reviewers(&owner), &branch) {
            return refuse(reason);
        }
        let wf = &self.project.workflow;
        if wf.stage(wf.revision.start.as_str()).is_none() {
            return refuse(
                "the workflow has no stage whose agent commits: a revision needs one (set `revision.start`)".into(),
            );
        }
        let column = self
            .r
            .column
            .clone()
            .unwrap_or_else(|| wf.revision.start.to_string());
        if self.r.revising.is_some() {
            // Resumed: admitted before, by the feedback read then.
            return admit(column, issue, context, reading);
        }
        let f = self.revision_feedback().unwrap_or_default();
        if f.is_empty() {
            let mut reason = format!(
                "no review feedback from a codeowner on pull request #{} since supervisor's last push",
                fb.number
            );
            if !f.left_out.is_empty() {
                reason.push_str(&format!(" (left out: {})", f.left_out.join("; ")));
            }
            return Want::End(
                RunEnd::NothingToRevise {
                    reason: reason.clone(),
                },
                vec![Event::Stopped { reason }],
            );
        }
        let h = self.revision_history().unwrap_or_default();
        if h.rounds >= settings.max_revisions {
            return self.want_exhausted(&h, settings.max_revisions);
        }
        Want::Record(vec![Event::Revising {
            pr: fb.number,
            round: f.round,
        }])
    }

    /// `maxRevisions` reached: say so once on the pull request, then stop.
    fn want_exhausted(&self, h: &History, max: u32) -> Want {
        let reason = format!(
            "maxRevisions ({max}) reached: supervisor revised this pull request {} time{}; a human takes it from here (or raise `maxRevisions`)",
            h.rounds,
            if h.rounds == 1 { "" } else { "s" }
        );
        let marker = Marker::new(
            self.run_id.clone(),
            REVISION_STAGE,
            h.rounds,
            MarkerKind::RevisionsExhausted,
        );
        if !h.exhausted_said && !self.handled(&marker) {
            return Want::Do(Effect::Post {
                marker,
                text: Text::Stopped {
                    stage: REVISION_STAGE.into(),
                    reason: UserText::ours(reason),
                },
            });
        }
        Want::End(
            RunEnd::Stopped {
                stage: REVISION_STAGE.into(),
                reason: UserText::ours(reason.clone()),
            },
            vec![Event::Stopped { reason }],
        )
    }

    /// The first and last steps of a revision's dry-run plan, which are not a run's: the pull
    /// request it revises and where its card goes, then what approval does instead of opening one.
    pub(super) fn revision_plan(&self) -> Option<(String, String)> {
        let pr = self.opts.revise?;
        let r = &self.project.workflow.revision;
        let card = match self.board().map(|b| b.column.as_ref()) {
            Some(Some(now)) => format!("the card (in {now}) goes to {}", r.column),
            Some(None) => format!("the card goes to {}", r.column),
            None => "the issue has no card".to_string(),
        };
        Some((
            format!("revise pull request #{pr}; {card} while it works"),
            format!(
                "answer the review threads, rewrite the pull request's body and move the card to {}",
                r.done_column
            ),
        ))
    }

    /// The card goes to the revision's column first (when it is on the board).
    pub(super) fn want_card_placed(&self, a: &Admitted) -> Option<Want> {
        if self.opts.revise.is_none() || self.r.placed || self.opts.dry_run {
            return None;
        }
        let board = a.board.as_ref()?;
        let p = &self.project;
        let to = p.workflow.revision.column.clone();
        let here = (board.column.as_ref()).and_then(|o| p.settings.stage_at(&p.workflow, o));
        if here.as_ref() == Some(&to) {
            return Some(Want::Record(vec![Event::CardPlaced {
                column: to.to_string(),
            }]));
        }
        Some(Want::Do(Effect::MoveCard {
            card: Box::new(board.clone()),
            to,
        }))
    }

    /// A revision's transitions move no card, except the last one, to the revision's done column.
    pub(super) fn want_revision_move(&self, a: &Admitted, t: &Transition) -> Want {
        let to_done = self
            .stage(&t.to)
            .is_some_and(|s| s.built_in == Some(BuiltIn::Done));
        if let Some(card) = a.board.as_ref().filter(|_| to_done) {
            return Want::Do(Effect::MoveCard {
                card: Box::new(card.clone()),
                to: self.project.workflow.revision.done_column.clone(),
            });
        }
        Want::Record(vec![Event::Applied {
            transition: t.clone(),
        }])
    }

    /// The worktree of a revision: the pull request's branch at its head.
    pub(super) fn revision_worktree(&self) -> Option<Effect> {
        let fb = self.feedback()?;
        Some(Effect::PrepareRevision {
            head: fb.head_sha.clone(),
            ours: self.revision_history().and_then(|h| h.head),
        })
    }

    pub(super) fn absorb_revision_worktree(
        &mut self,
        result: Result<(WorktreeInfo, Vec<String>), UserText>,
    ) -> Vec<Event> {
        match result {
            Ok((info, warnings)) => self.absorb_worktree(info, warnings),
            Err(reason) => {
                // Nothing to work in: the stop is said on the pull request without a worktree.
                let (stage, attempt) = self.column_attempt();
                let none = WorktreeInfo {
                    path: String::new(),
                    branch: self.feedback().map(|f| f.head.clone()).unwrap_or_default(),
                    base: self.project.settings.default_branch.clone(),
                    reused: crate::workspace::Reuse::ExistingBranch,
                };
                if let Some(a) = self.admitted_run_mut() {
                    a.worktree = Some(none);
                }
                vec![Event::Halted {
                    stage,
                    attempt,
                    halt: crate::pipeline::Halt::stop(reason),
                }]
            }
        }
    }

    pub(super) fn absorb_answer(
        &mut self,
        thread: String,
        result: Result<bool, crate::pipeline::EffectError>,
    ) -> Vec<Event> {
        match result {
            Ok(resolved) => vec![Event::ThreadAnswered { thread, resolved }],
            Err(e) => vec![
                warning(format!("could not answer review thread {thread}: {e}")),
                Event::ThreadAnswered {
                    thread,
                    resolved: false,
                },
            ],
        }
    }

    /// After approval: answer each thread, rewrite the body, say what the revision did.
    pub(super) fn want_revision_done(
        &self,
        a: &Admitted,
        w: &super::Work,
        outcome: &Outcome,
        t: &Transition,
    ) -> Option<Want> {
        let f = self.revision_feedback()?;
        let fb = self.feedback()?;
        let sha = (self.r.pushed.clone()).unwrap_or_else(|| CommitSha::new(&fb.head_sha));
        for (_, th) in f.threads() {
            if self.r.answered.contains(&th.thread) {
                continue;
            }
            let marker = self.marker(REVISION_STAGE, f.round, MarkerKind::Thread(th.reply_to));
            let replied = fb
                .threads
                .iter()
                .filter(|x| x.id == th.thread)
                .flat_map(|x| &x.comments)
                .any(|c| {
                    self.viewer()
                        .is_some_and(|v| v.eq_ignore_ascii_case(&c.author))
                        && marker.is_in(&c.body)
                });
            return Some(Want::Do(Effect::AnswerThread(Box::new(ThreadAnswer {
                thread: th.thread.clone(),
                reply_to: th.reply_to,
                marker,
                text: Text::ThreadAnswer { sha: sha.clone() },
                resolve: self.project.settings.resolve_review_threads,
                replied,
            }))));
        }
        if !self.r.body_updated {
            let Some(score) = t.score.clone() else {
                return Some(Want::Record(vec![super::halt(
                    w.stage.clone(),
                    w.attempt,
                    "the approval carries no audit score: the pull request's body is not rewritten without one",
                )]));
            };
            let mut request = self.pr_request(&a.issue, outcome, score);
            request.head_sha = Some(sha.clone());
            request.revision = f.round;
            // The body counts the pull request's whole history: the run that opened it, the
            // revisions before this one, and this one.
            let (rejections, bounces) = self
                .revision_history()
                .and_then(|h| h.loops)
                .unwrap_or_default();
            request.rejections += rejections;
            request.gate_bounces += bounces;
            if request.proof.is_none() {
                request.kept_proof = self.kept_proof();
            }
            return Some(Want::Do(Effect::UpdatePullBody {
                number: f.pr,
                request: Box::new(request),
            }));
        }
        let marker = self.marker(REVISION_STAGE, f.round, MarkerKind::Revised);
        (!self.handled(&marker)).then(|| {
            Want::Do(Effect::Post {
                marker,
                text: Text::Revised {
                    round: f.round,
                    sha,
                    threads: f
                        .threads()
                        .map(|(path, th)| (path.to_string(), th.line))
                        .collect(),
                    general: f.general.len(),
                    score: t.score.clone().map(Box::new),
                    left_out: f.left_out.clone(),
                },
            })
        })
    }

    /// Whether `note` is a review stage's own comment (the auditor's).
    pub(super) fn is_review_note(&self, note: &crate::pipeline::TrustedNote) -> bool {
        note.kind == crate::pipeline::NoteKind::Stage
            && note
                .stage
                .as_deref()
                .and_then(|s| self.stage(s))
                .is_some_and(|s| s.review)
    }

    /// The latest approving audit among the trusted notes: the last review-stage comment.
    pub(super) fn approved_audit(&self) -> Option<String> {
        self.trusted_notes()
            .iter()
            .rfind(|n| self.is_review_note(n))
            .map(|n| n.body.clone())
    }

    /// A revision's head that is not the pull request's: work committed by a process that died
    /// before it recorded the commit.
    pub(super) fn unpushed_revision(&self, head: &CommitSha) -> Option<CommitSha> {
        let fb = self.feedback()?;
        (!self.r.new_commit && **head != fb.head_sha).then(|| head.clone())
    }

    /// How a revision that reached Done ended.
    pub(super) fn revised_end(&self) -> Option<RunEnd> {
        let fb = self.feedback()?;
        let f = self.revision_feedback()?;
        Some(RunEnd::Revised {
            number: fb.number,
            url: fb.url.clone(),
            round: f.round,
            sha: (self.r.pushed.as_deref())
                .unwrap_or(&fb.head_sha)
                .to_string(),
        })
    }
}
