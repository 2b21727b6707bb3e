//! A delivery's body, read as it arrives: each piece is hashed for the signature check as it
//! comes, and reading stops as soon as the body passes the size limit or outlasts its time, so
//! no more than the limit is ever held. How many bodies are read at once is bounded by
//! [`BodyBudget`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::events::Verifier;

/// Why a body was not read whole.
#[derive(Debug)]
pub(crate) enum Unread {
    /// It passed the size limit.
    TooLarge,
    /// It did not arrive in time.
    TooSlow,
    /// The connection failed or broke the framing.
    Broken(axum::Error),
}

/// Read `body` into memory, each piece fed to `verifier` on its way. At most `limit` bytes are
/// taken, within `time`; `declared` (its `Content-Length`) sizes the buffer once.
pub(crate) async fn read(
    body: Body,
    verifier: &mut Verifier,
    limit: usize,
    declared: Option<usize>,
    time: Duration,
) -> Result<Vec<u8>, Unread> {
    let reading = async {
        let mut body = body;
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(limit));
        while let Some(frame) = body.frame().await {
            let Ok(piece) = frame.map_err(Unread::Broken)?.into_data() else {
                continue; // trailers
            };
            if piece.len() > limit - bytes.len() {
                return Err(Unread::TooLarge);
            }
            verifier.update(&piece);
            bytes.extend_from_slice(&piece);
        }
        Ok(bytes)
    };
    tokio::time::timeout(time, reading)
        .await
        .unwrap_or(Err(Unread::TooSlow))
}

/// Memory for bodies being received, in bytes. A body reserves its declared size (the whole
/// limit when it declares none) before a byte of it is read, and keeps it until it is answered;
/// one that finds too little left is refused at once, unread.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    bytes: Semaphore,
    total: usize,
    bodies: AtomicUsize,
}

/// A body's reservation: given back when dropped.
#[derive(Debug)]
pub(crate) struct Reserved<'a> {
    _bytes: SemaphorePermit<'a>,
    bodies: &'a AtomicUsize,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.bodies.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BodyBudget {
    pub(crate) fn new(total: usize) -> BodyBudget {
        // A semaphore counts at most `usize::MAX >> 3` permits.
        let total = total.min(Semaphore::MAX_PERMITS);
        BodyBudget {
            bytes: Semaphore::new(total),
            total,
            bodies: AtomicUsize::new(0),
        }
    }

    /// Reserve `bytes` for a body, unless that much is not free now.
    pub(crate) fn reserve(&self, bytes: usize) -> Option<Reserved<'_>> {
        let permits = u32::try_from(bytes).ok()?;
        let permit = self.bytes.try_acquire_many(permits).ok()?;
        self.bodies.fetch_add(1, Ordering::Relaxed);
        Some(Reserved {
            _bytes: permit,
            bodies: &self.bodies,
        })
    }

    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Bodies holding a reservation.
    pub(crate) fn bodies(&self) -> usize {
        self.bodies.load(Ordering::Relaxed)
    }

    /// Bytes reserved by them.
    pub(crate) fn reserved(&self) -> usize {
        self.total - self.bytes.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use axum::body::Bytes;
    use futures_util::{StreamExt, stream};

    use super::*;
    use crate::events::{Signature, WebhookSecret};

    const TIME: Duration = Duration::from_secs(10);

    fn secret() -> WebhookSecret {
        WebhookSecret::new("0123456789abcdef-body-test").unwrap()
    }

    /// A verifier of the signature of `signed`.
    fn verifier(signed: &[u8]) -> Verifier {
        let header = secret().sign(signed);
        Signature::from_headers(Some(header.as_bytes()), None)
            .unwrap()
            .verifier(&secret())
    }

    /// A body arriving in the pieces given.
    fn in_pieces(pieces: Vec<&'static [u8]>) -> Body {
        Body::from_stream(stream::iter(
            pieces
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(Bytes::from_static(p))),
        ))
    }

    #[tokio::test]
    async fn a_body_in_pieces_is_read_and_verified_as_in_one() {
        let whole = b"{\"zen\":\"Keep it logically awesome.\"}";
        let pieces: Vec<&'static [u8]> =
            vec![b"{\"zen\":", b"", b"\"Keep it logic", b"ally awesome.\"}"];
        let mut check = verifier(whole);
        let read = read(in_pieces(pieces), &mut check, 1024, None, TIME)
            .await
            .unwrap();
        assert_eq!(read, whole);
        assert_eq!(check.finish(), Ok(()));
    }

    #[tokio::test]
    async fn a_body_signed_otherwise_is_read_and_refused() {
        let mut check = verifier(b"{\"zen\":\"something else\"}");
        let pieces: Vec<&'static [u8]> = vec![b"{\"zen\":", b"\"Keep it logically awesome.\"}"];
        read(in_pieces(pieces), &mut check, 1024, None, TIME)
            .await
            .unwrap();
        assert_eq!(check.finish(), Err(crate::events::SignatureError::Mismatch));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_without_reading_it_whole() {
        const PIECE: usize = 64 * 1024;
        const LIMIT: usize = 1024 * 1024;
        // An endless body: read whole, it would never end.
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = pulled.clone();
        let endless = stream::repeat_with(move || {
            counter.fetch_add(PIECE, Ordering::Relaxed);
            Ok::<_, std::io::Error>(Bytes::from(vec![b' '; PIECE]))
        });
        let mut check = verifier(b"");
        let refused = read(Body::from_stream(endless), &mut check, LIMIT, None, TIME).await;
        assert!(matches!(refused, Err(Unread::TooLarge)), "{refused:?}");
        let pulled = pulled.load(Ordering::Relaxed);
        assert!(
            pulled <= LIMIT + PIECE,
            "{pulled} bytes were read for a limit of {LIMIT}"
        );

        // Exactly at the limit is read.
        let at_limit: &'static [u8] = &[b' '; 1024];
        let mut check = verifier(at_limit);
        let read = read(
            in_pieces(vec![&at_limit[..1000], &at_limit[1000..]]),
            &mut check,
            1024,
            Some(1024),
            TIME,
        )
        .await;
        assert_eq!(read.unwrap().len(), 1024);
        assert_eq!(check.finish(), Ok(()));
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_is_refused_when_its_time_is_up() {
        // Its first piece comes, then nothing.
        let stalled = stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{"))])
            .chain(stream::pending());
        let mut check = verifier(b"{}");
        let time = Duration::from_millis(1);
        let refused = read(Body::from_stream(stalled), &mut check, 1024, Some(2), time).await;
        assert!(matches!(refused, Err(Unread::TooSlow)), "{refused:?}");
    }

    #[test]
    fn the_budget_admits_bodies_while_their_sizes_fit() {
        let budget = BodyBudget::new(100);
        let large = budget.reserve(60).expect("60 of 100 bytes are free");
        assert!(budget.reserve(41).is_none(), "40 bytes are left");
        let small = budget.reserve(40).expect("40 bytes are left");
        assert_eq!((budget.bodies(), budget.reserved()), (2, 100));
        assert!(budget.reserve(1).is_none());
        drop(large);
        assert_eq!((budget.bodies(), budget.reserved()), (1, 40));
        assert!(budget.reserve(60).is_some());
        drop(small);
        assert_eq!((budget.bodies(), budget.reserved()), (0, 0));
        assert!(budget.reserve(101).is_none(), "more than the whole budget");
        assert!(budget.reserve(usize::MAX).is_none());
    }
}
