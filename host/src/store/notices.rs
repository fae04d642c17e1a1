//! Incidents and their notifications (`[[notify]]`), as the store keeps
//! them. An incident is a spell of one kind of trouble of one job (its
//! windows failing, late, stale, abandoned, or the job paused by jobhost):
//! at most one of a kind is open per job, so that of the hosts that see the
//! same trouble one opens it, and the notifications it stages are staged
//! once. A notification is an outbox row of its own: a host leases it
//! before it sends it, marks it sent (or to be tried again later), and its
//! idempotency key names the incident, so a receiver can drop the rare
//! second copy a host that died mid-send leaves.

use std::time::Duration;

use jiff::Timestamp;

use super::Actor;
use super::scripts::{SqlStore, chained, paused_in, seal};
use super::sql::{Backend, Kind, Row, Tx, Val};
use crate::core::error::Result;

/// One spell of trouble of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    pub id: i64,
    pub job: String,
    /// `failed`, `abandoned`, `late`, `stale` or `paused`.
    pub kind: String,
    /// The window that opened it, if one did.
    pub key: Option<String>,
    /// What opened it, one line.
    pub detail: String,
    /// When (the store's clock).
    pub opened_at: Timestamp,
    /// When it closed, if it did.
    pub closed_at: Option<Timestamp>,
    /// What closed it, one line.
    pub closed_by: Option<String>,
}

/// A notification to stage with an incident's opening or closing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotification {
    /// `failed`, ..., `recovered`, `paused`.
    pub event: String,
    /// The `[[notify]]` block's URL as written (no secret in it).
    pub target: String,
    /// What the receiver gets as `Idempotency-Key`.
    pub idempotency_key: String,
    /// The JSON body, as sent.
    pub body: String,
}

/// A notification as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub id: i64,
    pub job: String,
    pub incident: i64,
    pub event: String,
    pub target: String,
    pub idempotency_key: String,
    pub body: String,
    /// `PENDING`, `SENT` or `FAILED`.
    pub state: String,
    /// Sends made so far (a lease taken counts as one).
    pub attempts: u32,
    /// The last answer, one line.
    pub detail: Option<String>,
}

/// How one send of a notification went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The receiver answered 2xx.
    Delivered(String),
    /// Not this time: tried again after the wait.
    Later(String, Duration),
    /// Never: given up.
    GivenUp(String),
}

/// Incidents and notifications.
pub trait Notices {
    /// The job's open incidents, oldest first.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn open_incidents(&mut self, job: &str) -> Result<Vec<Incident>>;

    /// The job's newest incident of `kind`, open or closed.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn last_incident(&mut self, job: &str, kind: &str) -> Result<Option<Incident>>;

    /// Opens an incident of `kind` of `job` unless one is open, staging
    /// the notifications `notify` makes of its id in the same transaction;
    /// its id, or `None` when one was open (another host opened it).
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn open_incident(
        &mut self,
        job: &str,
        kind: &str,
        key: Option<&str>,
        detail: &str,
        now: Timestamp,
        notify: &dyn Fn(i64) -> Vec<NewNotification>,
    ) -> Result<Option<i64>>;

    /// Closes incident `id` if it is open, staging the notifications
    /// `notify` makes of it in the same transaction; whether this call
    /// closed it.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn close_incident(
        &mut self,
        id: i64,
        by: &str,
        now: Timestamp,
        notify: &dyn Fn(&Incident) -> Vec<NewNotification>,
    ) -> Result<bool>;

    /// Leases to `owner`, for `lease`, up to `limit` of `job`'s pending
    /// notifications that are due and leased by nobody, oldest first; each
    /// lease counts as an attempt.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn take_notifications(
        &mut self,
        job: &str,
        owner: &str,
        lease: Duration,
        limit: usize,
        now: Timestamp,
    ) -> Result<Vec<Notification>>;

    /// Records how the send of notification `id`, leased by `owner`, went.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn notification_sent(
        &mut self,
        id: i64,
        owner: &str,
        sent: &Sent,
        now: Timestamp,
    ) -> Result<()>;

    /// Pauses `job` for `actor` unless it is paused, opening with it, in
    /// the same transaction, the incident `paused` about window `key` and
    /// staging the notifications `notify` makes of its id; the incident's
    /// id, or `None` when the job was paused already (a person, or another
    /// host, paused it). The pause is a pause as `jobhost pause` makes it
    /// (its audit line, its chain entry); `jobhost resume` ends it.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn auto_pause(
        &mut self,
        job: &str,
        actor: Actor<'_>,
        key: &str,
        now: Timestamp,
        notify: &dyn Fn(i64) -> Vec<NewNotification>,
    ) -> Result<Option<i64>>;

    /// The job's notifications, newest first, at most `limit`.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn notifications(&mut self, job: &str, limit: usize) -> Result<Vec<Notification>>;

    /// The notifications of the job's open incidents, oldest first, at
    /// most `limit`, without their bodies (`body` is empty).
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn open_notifications(&mut self, job: &str, limit: usize) -> Result<Vec<Notification>>;
}

const INCIDENT: &str = "id, job, kind, key, detail, {t opened_at}, {t closed_at}, closed_by";
const NOTIFICATION: &str =
    "id, job, incident, event, target, idempotency_key, body, state, attempts, detail";

fn incident(r: &dyn Row) -> Result<Incident> {
    Ok(Incident {
        id: r.int(0)?,
        job: r.text(1)?,
        kind: r.text(2)?,
        key: r.opt_text(3)?,
        detail: r.text(4)?,
        opened_at: r.time(5)?,
        closed_at: r.opt_time(6)?,
        closed_by: r.opt_text(7)?,
    })
}

fn notification(r: &dyn Row) -> Result<Notification> {
    Ok(Notification {
        id: r.int(0)?,
        job: r.text(1)?,
        incident: r.int(2)?,
        event: r.text(3)?,
        target: r.text(4)?,
        idempotency_key: r.text(5)?,
        body: r.text(6)?,
        state: r.text(7)?,
        attempts: r.count(8)?,
        detail: r.opt_text(9)?,
    })
}

/// Stages `notes` of `job`'s incident `id` in `tx`.
fn stage<T: Tx>(tx: &mut T, job: &str, id: i64, notes: &[NewNotification]) -> Result<()> {
    for n in notes {
        tx.exec(
            "stage a notification",
            "INSERT INTO {notifications} (job, incident, event, target, idempotency_key, body,
                 state, attempts, next_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', 0, {now}, {now})
             ON CONFLICT (idempotency_key, target) DO NOTHING",
            &[
                Val::Text(job),
                Val::Int(id),
                Val::Text(&n.event),
                Val::Text(&n.target),
                Val::Text(&n.idempotency_key),
                Val::Text(&n.body),
            ],
        )?;
    }
    Ok(())
}

/// Opens in `tx` an incident of `kind` of `job` unless one is open,
/// staging what `notify` makes of its id; its id, if this opened it.
fn opened<T: Tx>(
    tx: &mut T,
    job: &str,
    kind: &str,
    key: Option<&str>,
    detail: &str,
    notify: &dyn Fn(i64) -> Vec<NewNotification>,
) -> Result<Option<i64>> {
    let id = tx.one(
        "open an incident",
        "INSERT INTO {incidents} (job, kind, key, detail, opened_at)
         VALUES ($1, $2, $3, $4, {now})
         ON CONFLICT (job, kind) WHERE closed_at IS NULL DO NOTHING
         RETURNING id",
        &[
            Val::Text(job),
            Val::Text(kind),
            Val::OptText(key),
            Val::Text(detail),
        ],
        &mut |r| r.int(0),
    )?;
    if let Some(id) = id {
        stage(tx, job, id, &notify(id))?;
    }
    Ok(id)
}

impl<B: Backend> Notices for SqlStore<B> {
    fn open_incidents(&mut self, job: &str) -> Result<Vec<Incident>> {
        if !self.backend.notice_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the job's open incidents",
            &format!(
                "SELECT {INCIDENT} FROM {{incidents}} WHERE job = $1 AND closed_at IS NULL
                 ORDER BY id"
            ),
            &[Val::Text(job)],
            &mut incident,
        )
    }

    fn last_incident(&mut self, job: &str, kind: &str) -> Result<Option<Incident>> {
        if !self.backend.notice_tables() {
            return Ok(None);
        }
        self.row(
            "read the job's last incident",
            &format!(
                "SELECT {INCIDENT} FROM {{incidents}} WHERE job = $1 AND kind = $2
                 ORDER BY id DESC LIMIT 1"
            ),
            &[Val::Text(job), Val::Text(kind)],
            &mut incident,
        )
    }

    fn open_incident(
        &mut self,
        job: &str,
        kind: &str,
        key: Option<&str>,
        detail: &str,
        now: Timestamp,
        notify: &dyn Fn(i64) -> Vec<NewNotification>,
    ) -> Result<Option<i64>> {
        let what = "open an incident";
        let mut tx = self.backend.begin(Kind::Write, what, now)?;
        let id = opened(&mut tx, job, kind, key, detail, notify)?;
        tx.commit(what)?;
        Ok(id)
    }

    fn close_incident(
        &mut self,
        id: i64,
        by: &str,
        now: Timestamp,
        notify: &dyn Fn(&Incident) -> Vec<NewNotification>,
    ) -> Result<bool> {
        let what = "close an incident";
        let mut tx = self.backend.begin(Kind::Write, what, now)?;
        let closed = tx.one(
            what,
            &format!(
                "UPDATE {{incidents}} SET closed_at = {{now}}, closed_by = $2
                 WHERE id = $1 AND closed_at IS NULL
                 RETURNING {INCIDENT}"
            ),
            &[Val::Int(id), Val::Text(by)],
            &mut incident,
        )?;
        if let Some(i) = &closed {
            stage(&mut tx, &i.job, i.id, &notify(i))?;
        }
        tx.commit(what)?;
        Ok(closed.is_some())
    }

    fn take_notifications(
        &mut self,
        job: &str,
        owner: &str,
        lease: Duration,
        limit: usize,
        now: Timestamp,
    ) -> Result<Vec<Notification>> {
        if !self.backend.notice_tables() {
            return Ok(Vec::new());
        }
        // Most passes find nothing due: a read says so without taking the
        // write lock (SQLite's is the whole store's).
        let look = "look for due notifications";
        let mut read = self.backend.begin(Kind::Read, look, now)?;
        let due = read.one(
            look,
            "SELECT id FROM {notifications}
             WHERE job = $1 AND state = 'PENDING' AND next_at <= {now}
               AND (lease_until IS NULL OR lease_until < {now})
             LIMIT 1",
            &[Val::Text(job)],
            &mut |r| r.int(0),
        )?;
        read.commit(look)?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        let what = "lease notifications";
        let mut tx = self.backend.begin(Kind::Write, what, now)?;
        // The outer conditions are checked again on the row a concurrent
        // lease left (PostgreSQL's read committed): of two hosts, one
        // leases each row.
        let mut taken = tx.query(
            what,
            &format!(
                "UPDATE {{notifications}} SET lease_until = {{after $3}}, owner = $2,
                     attempts = attempts + 1
                 WHERE id IN (SELECT id FROM {{notifications}}
                              WHERE job = $1 AND state = 'PENDING' AND next_at <= {{now}}
                                AND (lease_until IS NULL OR lease_until < {{now}})
                              ORDER BY id LIMIT $4)
                   AND state = 'PENDING' AND (lease_until IS NULL OR lease_until < {{now}})
                 RETURNING {NOTIFICATION}"
            ),
            &[
                Val::Text(job),
                Val::Text(owner),
                Val::After(Some(lease)),
                Val::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
            ],
            &mut notification,
        )?;
        tx.commit(what)?;
        taken.sort_by_key(|n| n.id);
        Ok(taken)
    }

    fn notification_sent(
        &mut self,
        id: i64,
        owner: &str,
        sent: &Sent,
        now: Timestamp,
    ) -> Result<()> {
        let what = "record a notification's send";
        let (state, detail, after) = match sent {
            Sent::Delivered(d) => ("SENT", d, Duration::ZERO),
            Sent::Later(d, wait) => ("PENDING", d, *wait),
            Sent::GivenUp(d) => ("FAILED", d, Duration::ZERO),
        };
        self.write_one(
            what,
            "UPDATE {notifications} SET state = $3, detail = $4, next_at = {after $5},
                 lease_until = NULL, owner = NULL
             WHERE id = $1 AND owner = $2",
            &[
                Val::Int(id),
                Val::Text(owner),
                Val::Text(state),
                Val::Text(detail),
                Val::After(Some(after)),
            ],
            now,
        )?;
        Ok(())
    }

    fn auto_pause(
        &mut self,
        job: &str,
        actor: Actor<'_>,
        key: &str,
        now: Timestamp,
        notify: &dyn Fn(i64) -> Vec<NewNotification>,
    ) -> Result<Option<i64>> {
        let what = "pause the job after its failures";
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        let paused = tx.one(
            what,
            "INSERT INTO {pauses} (job, note, actor, since) VALUES ($1, $2, $3, {now})
             ON CONFLICT (job) DO NOTHING
             RETURNING job",
            &[Val::Text(job), Val::Text(actor.reason), Val::Text(actor.by)],
            &mut |r| r.text(0),
        )?;
        if paused.is_none() {
            // Paused already: nothing is written (dropped, rolled back).
            return Ok(None);
        }
        paused_in(&mut tx, &mut chain, job, actor, now)?;
        let id = opened(&mut tx, job, "paused", Some(key), actor.reason, notify)?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(id)
    }

    fn notifications(&mut self, job: &str, limit: usize) -> Result<Vec<Notification>> {
        if !self.backend.notice_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the job's notifications",
            &format!(
                "SELECT {NOTIFICATION} FROM {{notifications}} WHERE job = $1
                 ORDER BY id DESC LIMIT $2"
            ),
            &[
                Val::Text(job),
                Val::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
            ],
            &mut notification,
        )
    }

    fn open_notifications(&mut self, job: &str, limit: usize) -> Result<Vec<Notification>> {
        if !self.backend.notice_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the notifications of the job's open incidents",
            "SELECT id, job, incident, event, target, idempotency_key, CAST('' AS TEXT), state,
                    attempts, detail
             FROM {notifications}
             WHERE incident IN (SELECT id FROM {incidents} WHERE job = $1 AND closed_at IS NULL)
             ORDER BY incident, id LIMIT $2",
            &[
                Val::Text(job),
                Val::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
            ],
            &mut notification,
        )
    }
}
