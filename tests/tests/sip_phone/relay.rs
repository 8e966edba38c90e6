//! A TCP relay the tests cut: the network between two parts, failing mid-call.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A TCP relay in front of a local port (a phone's SIP port, standing for a trunk's proxy;
/// a gateway's, standing for the network between it and the edge): each connection
/// accepted is joined to a new one to the port, byte for byte, until [`TcpRelay::cut`].
pub(crate) struct TcpRelay {
    pub(crate) port: u16,
    /// Both sides of every connection joined, for cutting them.
    open: Arc<Mutex<Vec<TcpStream>>>,
    accepted: Arc<Mutex<usize>>,
}

impl TcpRelay {
    pub(crate) fn to(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a relay port");
        let port = listener.local_addr().expect("its address").port();
        let open = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(Mutex::new(0));
        let (open_in, accepted_in) = (Arc::clone(&open), Arc::clone(&accepted));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(phone) = TcpStream::connect(("127.0.0.1", target)) else { continue };
                *accepted_in.lock().expect("count") += 1;
                let mut open = open_in.lock().expect("open");
                for stream in [&client, &phone] {
                    open.push(stream.try_clone().expect("a clone"));
                }
                pump(client.try_clone().expect("a clone"), phone.try_clone().expect("a clone"));
                pump(phone, client);
            }
        });
        Self { port, open, accepted }
    }

    /// Closes every connection joined so far, both ways (the phone's side and the edge's).
    pub(crate) fn cut(&self) {
        for stream in self.open.lock().expect("open").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    pub(crate) fn accepted(&self) -> usize {
        *self.accepted.lock().expect("count")
    }
}

/// Copies what `from` reads to `to` until either side ends, then ends both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
