//! A real SMTP server on loopback, for tests: speaks the protocol over TCP (greeting, EHLO/HELO,
//! MAIL, RCPT, DATA, RSET, NOOP, QUIT), advertises no STARTTLS and records each message.
//! Recipients containing [`REJECTED_MARK`] are refused, as a real server refuses unknown users.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// One message as the server received it.
#[derive(Clone, Debug)]
pub struct ReceivedMail {
    pub from: String,
    pub recipients: Vec<String>,
    /// The DATA section, dot-unstuffed, without the final `.` line.
    pub data: String,
}

/// Recipients whose address contains this are refused with 550.
pub const REJECTED_MARK: &str = "rejected";

pub struct TestSmtpServer {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<ReceivedMail>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestSmtpServer {
    pub async fn start() -> TestSmtpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind smtp");
        let addr = listener.local_addr().expect("local addr");
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, sink.clone()));
            }
        });
        TestSmtpServer {
            addr,
            received,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    pub fn received(&self) -> Vec<ReceivedMail> {
        self.received.lock().expect("lock").clone()
    }
}

impl Drop for TestSmtpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn session(stream: TcpStream, sink: Arc<Mutex<Vec<ReceivedMail>>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    if !say(&mut write, "220 test.smtp ESMTP ready\r\n").await {
        return;
    }
    let mut from: Option<String> = None;
    let mut recipients = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let command = line.trim_end_matches(['\r', '\n']);
        let verb = command
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let answer = match verb.as_str() {
            "EHLO" => "250-test.smtp greets you\r\n250-8BITMIME\r\n250 SIZE 10485760\r\n",
            "HELO" => "250 test.smtp\r\n",
            "MAIL" => {
                from = Some(angle_addr(command));
                recipients.clear();
                "250 OK\r\n"
            }
            "RCPT" if from.is_some() && command.contains(REJECTED_MARK) => {
                "550 5.1.1 no such user\r\n"
            }
            "RCPT" if from.is_some() => {
                recipients.push(angle_addr(command));
                "250 OK\r\n"
            }
            "RCPT" => "503 MAIL first\r\n",
            "DATA" if from.is_some() && !recipients.is_empty() => {
                if !say(&mut write, "354 End data with <CR><LF>.<CR><LF>\r\n").await {
                    return;
                }
                let Some(data) = read_data(&mut lines).await else {
                    return;
                };
                sink.lock().expect("lock").push(ReceivedMail {
                    from: from.take().unwrap_or_default(),
                    recipients: std::mem::take(&mut recipients),
                    data,
                });
                "250 OK queued\r\n"
            }
            "DATA" => "503 need MAIL and RCPT first\r\n",
            "RSET" => {
                from = None;
                recipients.clear();
                "250 OK\r\n"
            }
            "NOOP" => "250 OK\r\n",
            "QUIT" => {
                say(&mut write, "221 bye\r\n").await;
                return;
            }
            _ => "502 command not implemented\r\n",
        };
        if !say(&mut write, answer).await {
            return;
        }
    }
}

async fn say(write: &mut OwnedWriteHalf, text: &str) -> bool {
    write.write_all(text.as_bytes()).await.is_ok()
}

/// Reads DATA lines up to the lone `.`, undoing dot-stuffing. `None` if the peer went away.
async fn read_data(lines: &mut BufReader<OwnedReadHalf>) -> Option<String> {
    let mut data = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == ".\r\n" || line == ".\n" {
            return Some(data);
        }
        data.push_str(line.strip_prefix('.').unwrap_or(&line));
    }
}

/// `MAIL FROM:<a@b> SIZE=1` → `a@b`.
fn angle_addr(command: &str) -> String {
    let start = command.find('<').map_or(0, |i| i + 1);
    let end = command[start..]
        .find('>')
        .map_or(command.len(), |i| start + i);
    command[start..end].to_owned()
}

impl ReceivedMail {
    fn split(&self) -> (&str, &str) {
        self.data.split_once("\r\n\r\n").expect("headers and body")
    }

    /// A header's value, unfolded, with RFC 2047 encoded words decoded.
    pub fn header(&self, name: &str) -> Option<String> {
        let unfolded = self.split().0.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.split("\r\n").find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| decode_encoded_words(value.trim()))
        })
    }

    /// The body, with its Content-Transfer-Encoding undone.
    pub fn body_text(&self) -> String {
        let body = self.split().1;
        match self
            .header("Content-Transfer-Encoding")
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            Some("quoted-printable") => decode_quoted_printable(body),
            Some("base64") => {
                let compact: String = body.split_whitespace().collect();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .expect("base64 body");
                String::from_utf8(bytes).expect("utf-8 body")
            }
            _ => body.to_owned(),
        }
    }
}

/// Decodes `=?utf-8?b?…?=` and `=?utf-8?q?…?=` words; whitespace between two encoded words
/// is dropped, as RFC 2047 says.
fn decode_encoded_words(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    let mut last_was_word = false;
    while let Some(start) = rest.find("=?") {
        let Some(word) = parse_word(&rest[start..]) else {
            break;
        };
        let gap = &rest[..start];
        if !(last_was_word && gap.trim().is_empty()) {
            out.push_str(gap);
        }
        out.push_str(&word.0);
        rest = &rest[start + word.1..];
        last_was_word = true;
    }
    out.push_str(rest);
    out
}

/// `=?charset?enc?text?=` at the start of `s` → (decoded text, length consumed).
fn parse_word(s: &str) -> Option<(String, usize)> {
    let inner = &s[2..];
    let mut parts = inner.splitn(3, '?');
    let _charset = parts.next()?;
    let encoding = parts.next()?;
    let tail = parts.next()?;
    let end = tail.find("?=")?;
    let text = &tail[..end];
    let consumed = 2 + inner.len() - tail.len() + end + 2;
    let bytes = match encoding {
        "b" | "B" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?,
        "q" | "Q" => decode_quoted_printable(&text.replace('_', " ")).into_bytes(),
        _ => return None,
    };
    Some((String::from_utf8(bytes).ok()?, consumed))
}

fn decode_quoted_printable(s: &str) -> String {
    let joined = s.replace("=\r\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && let Some(hex) = joined.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).expect("utf-8 after quoted-printable")
}
