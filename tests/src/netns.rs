//! Hosts on networks of their own, for partition tests: an [`Island`] is a
//! network namespace joined to the test's namespace by a veth pair, so a
//! process started in it reaches the test's servers only over that link,
//! and [`Island::cut`] takes the link down (packets are dropped, as in a
//! real partition: no reset, no refusal) until [`Island::heal`]. The
//! servers stay on 127.0.0.1; a [`Relay`] listens on the island's gateway
//! address in the test's namespace and passes each connection on to one,
//! and can be cut on its own (a path to one server lost, the others kept):
//! it then holds what it receives, passing nothing either way, until
//! healed.
//!
//! Making namespaces needs root and `ip` (iproute2); [`Island::new`] says
//! why when it cannot.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;

/// A network namespace with one link to the test's namespace.
#[derive(Debug)]
pub struct Island {
    name: String,
    /// The link's end in the test's namespace (taken down by `cut`).
    outer: String,
    /// The test's namespace's address on the link.
    pub gateway: Ipv4Addr,
    /// The island's own address.
    pub address: Ipv4Addr,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Island {
    /// A new island, its link up. Names and addresses are made from the
    /// test process's id and a counter, so concurrent tests do not meet.
    ///
    /// # Errors
    ///
    /// Why it cannot be made (not root, no `ip`, no namespaces here).
    pub fn new() -> Result<Island, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let tag = format!("{}{n}", pid % 100_000);
        let name = format!("jh{tag}");
        let (outer, inner) = (format!("jo{tag}"), format!("ji{tag}"));
        // 10.A.B.C/30: A and B from the process and the counter.
        let a = 64 + (pid % 128) as u8;
        let b = (n % 64) as u8;
        let (gateway, address) = (
            Ipv4Addr::new(10, a, b * 4, 1),
            Ipv4Addr::new(10, a, b * 4, 2),
        );
        ip(&["netns", "add", &name])?;
        let island = Island {
            name,
            outer,
            gateway,
            address,
        };
        let set_up = || -> Result<(), String> {
            let ns = island.name.as_str();
            ip(&[
                "link",
                "add",
                &island.outer,
                "type",
                "veth",
                "peer",
                "name",
                &inner,
                "netns",
                ns,
            ])?;
            ip(&[
                "addr",
                "add",
                &format!("{gateway}/30"),
                "dev",
                &island.outer,
            ])?;
            ip(&["link", "set", &island.outer, "up"])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/30"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", ns, "link", "set", &inner, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])
        };
        set_up()?;
        Ok(island)
    }

    /// `program` run inside the island.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Takes the link down: nothing passes either way.
    ///
    /// # Panics
    ///
    /// When `ip` fails.
    pub fn cut(&self) {
        ip(&["link", "set", &self.outer, "down"]).expect("cut the link");
    }

    /// Brings the link back up.
    ///
    /// # Panics
    ///
    /// When `ip` fails.
    pub fn heal(&self) {
        ip(&["link", "set", &self.outer, "up"]).expect("heal the link");
    }
}

impl Drop for Island {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and the pair.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.outer]);
    }
}

/// Passes connections made to `addr` on to a server elsewhere, a thread
/// per direction of each connection.
#[derive(Debug)]
pub struct Relay {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
}

impl Relay {
    /// Listens on `on` (port 0: any free one) and passes every connection
    /// on to `to`.
    ///
    /// # Panics
    ///
    /// When it cannot listen on `on`.
    pub fn start(on: Ipv4Addr, to: SocketAddr) -> Relay {
        let listener = TcpListener::bind((on, 0)).expect("the relay listens");
        let addr = listener.local_addr().expect("the relay's address");
        let stop = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let (stopping, held) = (stop.clone(), cut.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(near) = conn else { continue };
                let Ok(far) = TcpStream::connect(to) else {
                    continue;
                };
                for (mut from, mut into) in [
                    (near.try_clone(), far.try_clone()),
                    (far.try_clone(), near.try_clone()),
                ]
                .into_iter()
                .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    let held = held.clone();
                    thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    // Cut: what came is held, not passed on.
                                    while held.load(Ordering::SeqCst) {
                                        thread::sleep(std::time::Duration::from_millis(10));
                                    }
                                    if into.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = into.shutdown(Shutdown::Write);
                    });
                }
            }
        });
        Relay { addr, stop, cut }
    }

    /// Passes nothing more either way until [`Relay::heal`]; connections
    /// stay open, as across a link that drops every packet.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Passes what it held, and everything after.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}
