//! A delivery's body, read as it arrives: each piece is hashed for the signature check as it
//! comes, and reading stops as soon as the body passes the size limit or outlasts its time, so
//! no more than the limit is ever taken. Until its signature is known a body is kept in a
//! [`Spool`]: its first bytes in memory, a larger one in an unnamed temporary file, read back
//! only once it is known to be GitHub's. How many bodies are taken at once, and how much of
//! them memory holds, is bounded by [`BodyBudget`].

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::events::Verifier;

/// Memory for one body's first bytes: GitHub's deliveries are mostly a few KiB.
pub(crate) const IN_MEMORY_EACH: usize = 1024 * 1024;
/// Memory for the first bytes of all the bodies being received.
pub(crate) const IN_MEMORY_ALL: usize = 4 * IN_MEMORY_EACH;

/// Why a body was not read whole.
#[derive(Debug)]
pub(crate) enum Unread {
    /// It passed the size limit.
    TooLarge,
    /// It did not arrive in time.
    TooSlow,
    /// The connection failed or broke the framing.
    Broken(axum::Error),
    /// Its temporary file could not be made or written.
    Unstored(io::Error),
}

/// Read `body` into a spool that holds at most `in_memory` bytes of it in memory, each piece
/// fed to `verifier` on its way. At most `limit` bytes are taken, within `time`; `declared`
/// (its `Content-Length`) decides at once where it goes.
pub(crate) async fn read(
    body: Body,
    verifier: &mut Verifier,
    limit: usize,
    declared: Option<usize>,
    in_memory: usize,
    time: Duration,
) -> Result<Spool, Unread> {
    let reading = async {
        let mut body = body;
        let mut spool = Spool::new(in_memory, declared);
        while let Some(frame) = body.frame().await {
            let Ok(piece) = frame.map_err(Unread::Broken)?.into_data() else {
                continue; // trailers
            };
            if piece.len() > limit - spool.len() {
                return Err(Unread::TooLarge);
            }
            verifier.update(&piece);
            spool.push(piece).await.map_err(Unread::Unstored)?;
        }
        Ok(spool)
    };
    tokio::time::timeout(time, reading)
        .await
        .unwrap_or(Err(Unread::TooSlow))
}

/// A body being received. Its bytes are kept in memory while they fit in its share; once they
/// do not (or its declared length says they will not), all of them are in an anonymous
/// temporary file, which has no name from the start and is gone with the spool, so a forged
/// body is dropped without ever being read back. Its reservation of the [`BodyBudget`] bounds
/// that file as it bounds the memory.
#[derive(Debug)]
pub(crate) struct Spool {
    /// How many bytes `memory` may hold.
    in_memory: usize,
    memory: Vec<u8>,
    file: Option<File>,
    len: usize,
}

impl Spool {
    fn new(in_memory: usize, declared: Option<usize>) -> Spool {
        let (in_memory, capacity) = match declared {
            Some(n) if n > in_memory => (0, 0),
            Some(n) => (in_memory, n),
            None => (in_memory, 0),
        };
        Spool {
            in_memory,
            memory: Vec::with_capacity(capacity),
            file: None,
            len: 0,
        }
    }

    /// Bytes taken so far.
    fn len(&self) -> usize {
        self.len
    }

    /// Add the next piece: to memory while the body fits its share, to the file otherwise,
    /// moving what memory held there first.
    async fn push(&mut self, piece: Bytes) -> io::Result<()> {
        let len = piece.len();
        if len == 0 {
            return Ok(());
        }
        if self.file.is_none() && len <= self.in_memory - self.memory.len() {
            self.make_room(len);
            self.memory.extend_from_slice(&piece);
        } else {
            let earlier = std::mem::take(&mut self.memory);
            let file = self.file.take();
            let file = on_blocking_thread(move || {
                let mut file = match file {
                    Some(file) => file,
                    None => tempfile::tempfile()?,
                };
                file.write_all(&earlier)?;
                file.write_all(&piece)?;
                Ok(file)
            })
            .await?;
            self.file = Some(file);
        }
        self.len += len;
        Ok(())
    }

    /// Grow `memory` for `more` bytes, never past the share.
    fn make_room(&mut self, more: usize) {
        let needed = self.memory.len() + more;
        if needed > self.memory.capacity() {
            let grown = (self.memory.capacity() * 2).max(needed).min(self.in_memory);
            self.memory.reserve_exact(grown - self.memory.len());
        }
    }

    /// The whole body, read back from its file if it has one: for a body known to be genuine.
    pub(crate) async fn into_bytes(self) -> io::Result<Vec<u8>> {
        let Some(mut file) = self.file else {
            return Ok(self.memory);
        };
        let len = self.len;
        on_blocking_thread(move || {
            file.rewind()?;
            let mut bytes = vec![0; len];
            file.read_exact(&mut bytes)?;
            Ok(bytes)
        })
        .await
    }

    /// Memory it holds for the body, in bytes.
    #[cfg(test)]
    fn in_memory(&self) -> usize {
        self.memory.capacity()
    }
}

/// Run file I/O off the runtime's threads: a write can wait on the disk.
async fn on_blocking_thread<T: Send + 'static>(
    io: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(io)
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// Room for bodies being received, in bytes. A body reserves its declared size (the whole
/// limit when it declares none) before a byte of it is read, and keeps it until it is answered;
/// one that finds too little left is refused at once, unread. Part of the room is memory: a
/// body also takes a share of `in_memory_all` (its size, at most `in_memory_each`) if that much
/// is free. A body without a share, or that outgrows it, waits in its [`Spool`]'s file.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    bytes: Semaphore,
    total: usize,
    memory: Semaphore,
    in_memory_each: usize,
    in_memory_all: usize,
    bodies: AtomicUsize,
}

/// A body's reservation: given back when dropped.
#[derive(Debug)]
pub(crate) struct Reserved<'a> {
    _bytes: SemaphorePermit<'a>,
    memory: Option<SemaphorePermit<'a>>,
    bodies: &'a AtomicUsize,
}

impl Reserved<'_> {
    /// Bytes of the body that memory may hold.
    pub(crate) fn in_memory(&self) -> usize {
        self.memory.as_ref().map_or(0, SemaphorePermit::num_permits)
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.bodies.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BodyBudget {
    pub(crate) fn new(total: usize, in_memory_each: usize, in_memory_all: usize) -> BodyBudget {
        // A semaphore counts at most `usize::MAX >> 3` permits.
        let total = total.min(Semaphore::MAX_PERMITS);
        let in_memory_all = in_memory_all.min(Semaphore::MAX_PERMITS);
        // A share larger than all of memory would never be granted.
        let in_memory_each = in_memory_each.min(in_memory_all);
        BodyBudget {
            bytes: Semaphore::new(total),
            total,
            memory: Semaphore::new(in_memory_all),
            in_memory_each,
            in_memory_all,
            bodies: AtomicUsize::new(0),
        }
    }

    /// Reserve `bytes` for a body, unless that much is not free now.
    pub(crate) fn reserve(&self, bytes: usize) -> Option<Reserved<'_>> {
        let permits = u32::try_from(bytes).ok()?;
        let permit = self.bytes.try_acquire_many(permits).ok()?;
        // `bytes` fits in a u32, and so does the smaller share.
        let share = bytes.min(self.in_memory_each) as u32;
        let memory = self.memory.try_acquire_many(share).ok();
        self.bodies.fetch_add(1, Ordering::Relaxed);
        Some(Reserved {
            _bytes: permit,
            memory,
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

    /// Memory for their first bytes, in all.
    pub(crate) fn in_memory_all(&self) -> usize {
        self.in_memory_all
    }

    /// Bytes of memory reserved by them.
    pub(crate) fn in_memory_reserved(&self) -> usize {
        self.in_memory_all - self.memory.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use futures_util::{StreamExt, stream};

    use super::*;
    use crate::events::{Signature, SignatureError, WebhookSecret};

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

    /// `len` bytes that differ from place to place, so that a piece out of order shows.
    fn varied(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// `whole` cut into pieces of the sizes given in turn (the last one takes the rest).
    fn cut(whole: &[u8], sizes: &[usize]) -> Vec<Bytes> {
        let mut pieces = Vec::new();
        let mut at = 0;
        for size in sizes.iter().cycle() {
            let end = (at + size).min(whole.len());
            pieces.push(Bytes::copy_from_slice(&whole[at..end]));
            at = end;
            if at == whole.len() {
                return pieces;
            }
        }
        unreachable!("sizes are not all 0")
    }

    #[tokio::test]
    async fn a_body_in_pieces_is_read_and_verified_as_in_one() {
        let whole = b"{\"zen\":\"Keep it logically awesome.\"}";
        let pieces: Vec<&'static [u8]> =
            vec![b"{\"zen\":", b"", b"\"Keep it logic", b"ally awesome.\"}"];
        let mut check = verifier(whole);
        let read = read(in_pieces(pieces), &mut check, 1024, None, 1024, TIME)
            .await
            .unwrap();
        assert_eq!(read.into_bytes().await.unwrap(), whole);
        assert_eq!(check.finish(), Ok(()));
    }

    #[tokio::test]
    async fn a_body_signed_otherwise_is_read_and_refused() {
        let mut check = verifier(b"{\"zen\":\"something else\"}");
        let pieces: Vec<&'static [u8]> = vec![b"{\"zen\":", b"\"Keep it logically awesome.\"}"];
        read(in_pieces(pieces), &mut check, 1024, None, 1024, TIME)
            .await
            .unwrap();
        assert_eq!(check.finish(), Err(SignatureError::Mismatch));
    }

    /// Past its memory share a body goes to its file, whether its length says so at once or
    /// it outgrows the share on the way, in a piece that crosses it: read back, it is whole.
    #[tokio::test]
    async fn a_verified_body_over_its_memory_share_is_read_back_whole() {
        const SHARE: usize = 64 * 1024;
        let whole = varied(5 * SHARE + 123);
        for declared in [Some(whole.len()), None] {
            let pieces = cut(&whole, &[1000, 0, 40_000, 30_000, 8192]);
            let mut check = verifier(&whole);
            let body = Body::from_stream(stream::iter(pieces).map(Ok::<_, std::io::Error>));
            let spool = read(body, &mut check, 1 << 20, declared, SHARE, TIME)
                .await
                .unwrap();
            assert_eq!(check.finish(), Ok(()));
            assert!(spool.file.is_some(), "declared {declared:?}: on disk");
            assert_eq!(spool.in_memory(), 0, "declared {declared:?}");
            let read = spool.into_bytes().await.unwrap();
            assert!(read == whole, "declared {declared:?}: read back as sent");
        }

        // A body of exactly its share stays in memory.
        let whole = varied(SHARE);
        let pieces = cut(&whole, &[SHARE - 1, 1]);
        let body = Body::from_stream(stream::iter(pieces).map(Ok::<_, std::io::Error>));
        let spool = read(body, &mut verifier(&whole), 1 << 20, None, SHARE, TIME)
            .await
            .unwrap();
        assert!(spool.file.is_none());
        assert_eq!(spool.into_bytes().await.unwrap(), whole);
    }

    /// A large forged body never has more than its share in memory, its file has no name
    /// while it is written, and the spool is dropped without being read back.
    #[tokio::test]
    async fn a_forged_large_body_holds_no_more_than_its_share_in_memory() {
        // Not a power of two: memory grown by doubling would pass it.
        const SHARE: usize = 100_000;
        let whole = varied(24 * SHARE);
        let mut check = verifier(b"another body");
        let mut spool = Spool::new(SHARE, None);
        let mut most = 0;
        for piece in cut(&whole, &[30_000, 17, 65_536]) {
            check.update(&piece);
            spool.push(piece).await.unwrap();
            most = most.max(spool.in_memory());
            assert!(spool.in_memory() <= SHARE, "{} bytes", spool.in_memory());
        }
        assert!(most > 0, "the first pieces were held in memory");
        assert_eq!(spool.in_memory(), 0, "moved to the file with the rest");
        assert_eq!(spool.len(), whole.len());
        assert_eq!(check.finish(), Err(SignatureError::Mismatch));
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = spool.file.as_ref().expect("on disk").as_raw_fd();
            let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
            assert!(
                path.to_string_lossy().ends_with(" (deleted)"),
                "the file has no name: {path:?}"
            );
        }
        drop(spool);

        // Declared larger than its share, it takes no memory at all.
        let pieces = cut(&whole, &[65_536]);
        let body = Body::from_stream(stream::iter(pieces).map(Ok::<_, std::io::Error>));
        let mut check = verifier(b"another body");
        let spool = read(body, &mut check, 1 << 30, Some(whole.len()), SHARE, TIME)
            .await
            .unwrap();
        assert_eq!((spool.in_memory(), spool.len()), (0, whole.len()));
        assert_eq!(check.finish(), Err(SignatureError::Mismatch));
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
        let refused = read(
            Body::from_stream(endless),
            &mut check,
            LIMIT,
            None,
            PIECE,
            TIME,
        )
        .await;
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
            1024,
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
        let refused = read(
            Body::from_stream(stalled),
            &mut check,
            1024,
            Some(2),
            1024,
            time,
        )
        .await;
        assert!(matches!(refused, Err(Unread::TooSlow)), "{refused:?}");
    }

    #[test]
    fn the_budget_admits_bodies_while_their_sizes_fit() {
        let budget = BodyBudget::new(100, 100, 100);
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

    #[test]
    fn memory_holds_a_share_of_each_body_while_it_has_room() {
        let budget = BodyBudget::new(100, 30, 50);
        let large = budget.reserve(60).unwrap();
        let small = budget.reserve(15).unwrap();
        assert_eq!((large.in_memory(), small.in_memory()), (30, 15));
        // 5 bytes of memory are left: all of a body's share or none of it.
        let on_disk = budget.reserve(10).unwrap();
        assert_eq!(on_disk.in_memory(), 0);
        assert_eq!(budget.in_memory_reserved(), 45);
        drop(large);
        assert_eq!(budget.in_memory_reserved(), 15);
        assert_eq!(budget.reserve(15).unwrap().in_memory(), 15);
        drop((small, on_disk));
        assert_eq!((budget.reserved(), budget.in_memory_reserved()), (0, 0));
    }
}
