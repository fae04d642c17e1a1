//! Bounded capture of the guest's stdout and stderr. Output up to the cap is
//! kept for the host to print as diagnostics; past it, bytes are counted and
//! dropped. Writing never fails for the guest, so a chatty guest is not
//! killed by its own `println!`, and nothing it prints can reach the host's
//! stdout, which carries only the receipt.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

#[derive(Debug, Default)]
struct Inner {
    kept: Vec<u8>,
    dropped: u64,
}

/// A capped in-memory sink for one of the guest's output streams.
#[derive(Debug, Clone)]
pub struct CappedOutput {
    inner: Arc<Mutex<Inner>>,
    cap: usize,
}

impl CappedOutput {
    /// A sink that keeps at most `cap` bytes.
    pub fn new(cap: usize) -> CappedOutput {
        CappedOutput {
            inner: Arc::new(Mutex::new(Inner::default())),
            cap,
        }
    }

    fn write(&self, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(inner.kept.len());
        let take = room.min(bytes.len());
        inner.kept.extend_from_slice(&bytes[..take]);
        inner.dropped += (bytes.len() - take) as u64;
    }

    /// The kept bytes and the number of bytes dropped.
    pub fn contents(&self) -> (Vec<u8>, u64) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (inner.kept.clone(), inner.dropped)
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        CappedOutput::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        CappedOutput::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
