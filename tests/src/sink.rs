//! A real HTTP endpoint on 127.0.0.1 for the tests: it records every
//! request it receives (path, headers, `Idempotency-Key`, body) and answers
//! with scripted replies per path: a status (optionally with
//! `Retry-After`, or a body), no answer at all (the connection hangs until
//! the sink is dropped), or a closed connection. Unscripted requests get
//! 200. Told to, it refuses stale senders as a fencing endpoint would: a
//! message whose `Jobhost-Fence` is lower than the highest it has seen for
//! the same `Jobhost-Window` is answered 409 and not taken. Started with
//! [`Sink::start_tls`], it speaks HTTPS with the certificate it is given.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One received request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The request target, for example `/digest`.
    pub path: String,
    /// Header names in lowercase, with their values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Refused as a stale sender's (its fence was lower than one seen).
    pub stale: bool,
    /// When its first line had arrived: the sender had begun to send it.
    pub began: std::time::Instant,
    /// When the whole request had arrived.
    pub arrived: std::time::Instant,
}

impl Request {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `Idempotency-Key` header.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.header("idempotency-key")
    }
}

/// How the sink answers one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// This status, empty body.
    Status(u16),
    /// This status with `Retry-After: <seconds>`.
    RetryAfter(u16, u64),
    /// This status with `Retry-After: <HTTP date>`.
    RetryAt(u16, &'static str),
    /// This status, with the request's `Authorization` and `X-*` headers
    /// echoed in the body (as some servers do in their error pages).
    Echo(u16),
    /// Record the request, never answer.
    Hang,
    /// Record the request, close the connection without answering.
    Close,
    /// This status with this body (for example a JSON answer).
    Body(u16, &'static str),
    /// As `Echo`, after this many bytes of filler (a long error page).
    EchoAfter(u16, usize),
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    scripts: HashMap<String, VecDeque<Reply>>,
    hung: Vec<TcpStream>,
    /// Refuse stale fences, keeping the highest fence seen per window.
    fencing: Option<HashMap<String, i64>>,
    /// How long each answer is held back.
    delay: Duration,
    /// Requests received and not yet answered, and the most at once.
    in_flight: u32,
    most_in_flight: u32,
}

/// The sink; stops accepting when dropped.
pub struct Sink {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    tls: bool,
}

impl Sink {
    /// Starts a sink on an ephemeral port of 127.0.0.1.
    ///
    /// # Panics
    ///
    /// When no port can be bound (a test set-up failure).
    pub fn start() -> Sink {
        Sink::start_with(None)
    }

    /// Starts an HTTPS sink on an ephemeral port of 127.0.0.1, whose
    /// connections are TLS sessions of `config` (its certificate and key).
    /// A connection whose handshake fails is not recorded.
    ///
    /// # Panics
    ///
    /// When no port can be bound (a test set-up failure).
    pub fn start_tls(config: Arc<rustls::ServerConfig>) -> Sink {
        Sink::start_with(Some(config))
    }

    fn start_with(tls: Option<Arc<rustls::ServerConfig>>) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test sink");
        let addr = listener.local_addr().expect("sink address");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let https = tls.is_some();
        thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, tls) = (st.clone(), tls.clone());
                thread::spawn(move || serve(conn, tls, &st));
            }
        });
        Sink {
            addr,
            state,
            stop,
            tls: https,
        }
    }

    /// `http://127.0.0.1:<port><path>` (`https://` for a TLS sink).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Answers the next requests to `path` with `replies`, in order; after
    /// them, 200.
    pub fn script(&self, path: &str, replies: &[Reply]) {
        self.lock()
            .scripts
            .entry(path.to_string())
            .or_default()
            .extend(replies.iter().copied());
    }

    /// From now on, answers 409 to a message whose `Jobhost-Fence` is lower
    /// than the highest seen for its `Jobhost-Window`, and does not take it.
    pub fn refuse_stale_fences(&self) {
        self.lock().fencing.get_or_insert_with(HashMap::new);
    }

    /// Forgets the requests received so far (a bench's next round).
    pub fn clear(&self) {
        self.lock().requests.clear();
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// Holds every answer back by `delay` from now on (a slow endpoint).
    pub fn answer_after(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    /// The most requests the sink held unanswered at once.
    pub fn most_in_flight(&self) -> u32 {
        self.lock().most_in_flight
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        self.lock().hung.clear();
    }
}

/// One accepted connection, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(c) => c.read(buf),
            Conn::Tls(c) => c.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(c) => c.write(buf),
            Conn::Tls(c) => c.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(c) => c.flush(),
            Conn::Tls(c) => {
                // The answer is whole: say so, as a server closing does.
                c.conn.send_close_notify();
                c.flush()
            }
        }
    }
}

fn serve(conn: TcpStream, tls: Option<Arc<rustls::ServerConfig>>, state: &Mutex<State>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    // The socket itself, to keep open (`Hang`) or shut (`Close`).
    let Ok(socket) = conn.try_clone() else {
        return;
    };
    let conn = match tls {
        None => Conn::Plain(conn),
        Some(config) => {
            let Ok(session) = rustls::ServerConnection::new(config) else {
                return;
            };
            Conn::Tls(Box::new(rustls::StreamOwned::new(session, conn)))
        }
    };
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let began = std::time::Instant::now();
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            let n = n.trim().to_ascii_lowercase();
            let v = v.trim().to_string();
            if n == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((n, v));
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    // The credentials and custom headers, as an error page might show them.
    let echoed: String = headers
        .iter()
        .filter(|(n, _)| n == "authorization" || n.starts_with("x-"))
        .map(|(n, v)| format!("{n}: {v}\n"))
        .collect();
    let reply = {
        let mut st = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let (window, fence) = (
            header("jobhost-window"),
            header("jobhost-fence").and_then(|f| f.parse::<i64>().ok()),
        );
        let stale = match (&mut st.fencing, window, fence) {
            (Some(seen), Some(window), Some(fence)) => {
                let highest = seen.entry(window).or_insert(fence);
                let stale = fence < *highest;
                *highest = (*highest).max(fence);
                stale
            }
            _ => false,
        };
        st.requests.push(Request {
            path: path.clone(),
            headers,
            body,
            stale,
            began,
            arrived: std::time::Instant::now(),
        });
        st.in_flight += 1;
        st.most_in_flight = st.most_in_flight.max(st.in_flight);
        if stale {
            Reply::Status(409)
        } else {
            st.scripts
                .get_mut(&path)
                .and_then(VecDeque::pop_front)
                .unwrap_or(Reply::Status(200))
        }
    };
    let delay = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .delay;
    thread::sleep(delay);
    // Counted as answered before the answer goes out: the client may send
    // its next request as soon as it has read this one's.
    {
        let mut st = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.in_flight = st.in_flight.saturating_sub(1);
    }
    let mut content = String::new();
    let (status, extra) = match reply {
        Reply::Status(s) => (s, String::new()),
        Reply::RetryAfter(s, secs) => (s, format!("Retry-After: {secs}\r\n")),
        Reply::RetryAt(s, date) => (s, format!("Retry-After: {date}\r\n")),
        Reply::Body(s, body) => {
            content = body.to_string();
            (s, String::new())
        }
        Reply::Echo(s) => {
            content = format!("rejected request with headers:\n{echoed}");
            (s, String::new())
        }
        Reply::EchoAfter(s, filler) => {
            content = format!("{}{echoed}", "-".repeat(filler));
            (s, String::new())
        }
        Reply::Hang => {
            state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .hung
                .push(socket);
            return;
        }
        Reply::Close => {
            let _ = socket.shutdown(std::net::Shutdown::Both);
            return;
        }
    };
    let conn = reader.get_mut();
    let _ = write!(
        conn,
        "HTTP/1.1 {status} Scripted\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{content}",
        content.len()
    );
    let _ = conn.flush();
}
