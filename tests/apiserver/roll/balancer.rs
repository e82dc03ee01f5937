//! A Service as kube-proxy makes one, on loopback: each new TCP connection goes to one endpoint
//! of the ready set (round robin, as IPVS does) and stays on it until either side closes; an
//! endpoint that leaves the set keeps its established connections (conntrack) and gets no new
//! ones. A connection that finds no endpoint, or one that refuses it, is closed at once: what
//! the client of a DNAT to a dead pod sees.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

pub struct Balancer {
    pub addr: SocketAddr,
    endpoints: Arc<Mutex<Vec<SocketAddr>>>,
    accepting: JoinHandle<()>,
}

impl Balancer {
    /// Listens on an ephemeral loopback port, with no endpoint yet.
    pub fn start(runtime: &Handle) -> Balancer {
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let endpoints = Arc::new(Mutex::new(Vec::<SocketAddr>::new()));
        let set = endpoints.clone();
        let accepting = runtime.spawn(async move {
            let next = AtomicUsize::new(0);
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let endpoint = {
                    let set = set.lock().unwrap();
                    (!set.is_empty()).then(|| set[next.fetch_add(1, Ordering::Relaxed) % set.len()])
                };
                tokio::spawn(forward(client, endpoint));
            }
        });
        Balancer {
            addr,
            endpoints,
            accepting,
        }
    }

    /// The endpoint turned ready: new connections may go to it.
    pub fn add(&self, endpoint: SocketAddr) {
        self.endpoints.lock().unwrap().push(endpoint);
    }

    /// The endpoint left the set: no new connections; established ones stay.
    pub fn remove(&self, endpoint: SocketAddr) {
        self.endpoints.lock().unwrap().retain(|e| *e != endpoint);
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Relays one connection, each side's end (FIN) passed on to the other.
async fn forward(mut client: TcpStream, endpoint: Option<SocketAddr>) {
    let Some(endpoint) = endpoint else { return };
    let Ok(mut backend) = TcpStream::connect(endpoint).await else {
        return;
    };
    let _ = (client.set_nodelay(true), backend.set_nodelay(true));
    let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
}
