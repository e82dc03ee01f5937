//! A webhook connection's TLS stream as hyper sees it: it reports HTTP/1 reads to the
//! connection's state (`slots::Conn::on_read`), and resets the TCP connection instead of ending
//! it when the close policy says so (`close::resets`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::server::slots::Conn;

pub(super) struct Tracked {
    inner: TlsStream<TcpStream>,
    /// HTTP/1 only: HTTP/2 clients send frames between requests.
    conn: Option<Arc<Conn>>,
    /// Set by the connection's task when it closes the connection: dropping the stream then
    /// sends a reset (SO_LINGER 0) rather than a FIN.
    pub reset: Arc<AtomicBool>,
}

impl Tracked {
    pub(super) fn new(inner: TlsStream<TcpStream>, conn: Option<Arc<Conn>>) -> Self {
        Tracked {
            inner,
            conn,
            reset: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Acquire) {
            // Nonblocking and zero: the close does not wait, it discards (nothing is pending
            // on an idle connection) and resets.
            let _ = self.inner.get_ref().0.set_zero_linger();
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before
            && let Some(conn) = &self.conn
        {
            conn.on_read();
        }
        result
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
