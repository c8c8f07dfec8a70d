//! The fake sid's input threads and `--listen` sockets: each line read goes to the fake sid, and
//! a client that connects is sent the history first and takes the previous client's place.

use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// A socket client: written to, and shut down when the next client connects.
pub(super) trait Conn: Write + Send {
    fn close(&self);
}

impl Conn for std::os::unix::net::UnixStream {
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

impl Conn for std::net::TcpStream {
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// Sends each line `reader` gives on `tx`, then `None` at its end (EOF or a read error).
pub(super) fn spawn_reader<R: BufRead + Send + 'static>(reader: R, tx: Sender<Option<String>>) {
    std::thread::spawn(move || {
        for line in reader.lines() {
            match line {
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });
}

/// Listens on `spec` (`unix:///path` or `tcp://host:port`, else exits 2) and attaches each
/// client that connects: the history, `replay_complete`, then its lines on `tx`.
pub(super) fn listen(
    spec: &str,
    history: Arc<Mutex<Vec<String>>>,
    client: Arc<Mutex<Option<Box<dyn Conn>>>>,
    tx: Sender<Option<String>>,
) {
    let attach =
        move |write: Box<dyn Conn>, read: Box<dyn BufRead + Send>, tx: &Sender<Option<String>>| {
            let history = history.lock().unwrap();
            let mut write = write;
            for line in history.iter() {
                let _ = writeln!(write, "{line}");
            }
            let _ = writeln!(
                write,
                "{{\"type\":\"replay_complete\",\"protocol_version\":5,\"sequence\":0}}"
            );
            let _ = write.flush();
            // The previous client is dropped: one client at a time.
            if let Some(old) = client.lock().unwrap().replace(write) {
                old.close();
            }
            drop(history);
            spawn_reader(read, tx.clone());
        };
    if let Some(path) = spec.strip_prefix("unix://") {
        let _ = std::fs::remove_file(path);
        let l = std::os::unix::net::UnixListener::bind(path).expect("bind the unix socket");
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let r = s.try_clone().expect("clone the socket");
                attach(Box::new(s), Box::new(BufReader::new(r)), &tx);
            }
        });
    } else if let Some(addr) = spec.strip_prefix("tcp://") {
        let l = std::net::TcpListener::bind(addr).expect("bind the tcp socket");
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let r = s.try_clone().expect("clone the socket");
                attach(Box::new(s), Box::new(BufReader::new(r)), &tx);
            }
        });
    } else {
        eprintln!("fake_sid: --listen wants unix:///path or tcp://host:port");
        std::process::exit(2);
    }
}
