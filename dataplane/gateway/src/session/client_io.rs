//! What a client's WebSocket runs over: the HTTP server's upgraded socket or an edge's
//! in-process pipe, behind one type so one session implementation serves every channel.

use switchboard_serve::frames::Upgraded;

/// What a client's WebSocket runs over: a socket the HTTP server upgraded, or (a channel at
/// the edge, WebRTC's among them) one end of an in-process pipe whose other end the edge's
/// call task writes frames into. One session implementation for every channel; a match per
/// read or write of the socket is all it costs the WebSocket path (hyper's upgraded
/// socket is itself a boxed trait object).
#[derive(Debug)]
pub enum ClientIo {
    /// A client's upgraded HTTP connection.
    Socket(Upgraded),
    /// An edge's in-process end.
    Edge(tokio::io::DuplexStream),
}

impl tokio::io::AsyncRead for ClientIo {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Socket(io) => std::pin::Pin::new(io).poll_read(cx, buf),
            Self::Edge(io) => std::pin::Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for ClientIo {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Socket(io) => std::pin::Pin::new(io).poll_write(cx, buf),
            Self::Edge(io) => std::pin::Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Socket(io) => std::pin::Pin::new(io).poll_flush(cx),
            Self::Edge(io) => std::pin::Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Socket(io) => std::pin::Pin::new(io).poll_shutdown(cx),
            Self::Edge(io) => std::pin::Pin::new(io).poll_shutdown(cx),
        }
    }
}
