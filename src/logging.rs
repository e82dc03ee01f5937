//! Log lines to stderr without ever making an admission wait for them: lines are formatted on
//! the request's thread and handed to a writer thread; if stderr is back-pressured (a slow log
//! collector) and the queue is full, lines are dropped and counted rather than blocking.

use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};

use crate::config::LogFormat;

/// Lines queued for the writer thread at most. A line is about 300-600 bytes (longest names,
/// JSON), so a full queue is 5-10 MB: well inside the Deployment's 128Mi limit, where
/// tracing-appender's default of 128k lines could take 80 MB exactly when stderr is stuck.
/// 16k lines still absorb a stall of many seconds at a busy apiserver's rate.
const QUEUED_LINES: usize = 16 * 1024;

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

#[derive(Debug)]
pub enum Error {
    /// `--log-level` is neither a level nor valid tracing directives.
    Filter(String, tracing_subscriber::filter::ParseError),
    /// Logging was set up once already in this process.
    AlreadyInstalled,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Filter(level, e) => write!(f, "invalid --log-level {level:?}: {e}"),
            Error::AlreadyInstalled => f.write_str("logging is already set up in this process"),
        }
    }
}

impl std::error::Error for Error {}

/// Installs the global subscriber writing to `writer` through the queue. Keep the guard alive
/// until exit: dropping it gives the writer thread about a second to write what is queued.
pub fn init<W>(format: LogFormat, level: &str, writer: W) -> Result<WorkerGuard, Error>
where
    W: std::io::Write + Send + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| Error::Filter(level.to_owned(), e))?;
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(QUEUED_LINES)
        .thread_name("log-writer")
        .finish(writer);
    let dropped = writer.error_counter();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.with_ansi(false).try_init(),
    };
    installed.map_err(|_| Error::AlreadyInstalled)?;
    let _ = DROPPED.set(dropped);
    Ok(guard)
}

/// Lines dropped because the queue was full (0 before [`init`]).
pub fn dropped_lines() -> u64 {
    DROPPED.get().map_or(0, |c| c.dropped_lines() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A writer that blocks until the test lets it go, like a stderr pipe nobody reads.
    struct Stuck {
        gate: Arc<Mutex<()>>,
        seen: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _open = self.gate.lock().unwrap();
            self.seen.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_stderr_drops_lines_instead_of_blocking() {
        let gate = Arc::new(Mutex::new(()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let held = gate.lock().unwrap();
        let stuck = Stuck {
            gate: gate.clone(),
            seen: seen.clone(),
        };
        assert!(matches!(
            init(LogFormat::Text, "info,x=nope", std::io::sink()),
            Err(Error::Filter(..))
        ));
        let guard = init(LogFormat::Text, "info", stuck).unwrap();
        assert!(matches!(
            init(LogFormat::Text, "info", std::io::sink()),
            Err(Error::AlreadyInstalled)
        ));
        // Far more lines than the queue holds, on another thread so that a logger that blocks
        // fails this test instead of hanging it.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for i in 0..QUEUED_LINES + 1000 {
                tracing::info!(i, "a line");
            }
            let _ = done.send(());
        });
        assert!(
            finished
                .recv_timeout(std::time::Duration::from_secs(30))
                .is_ok(),
            "logging blocked on a stuck writer"
        );
        assert!(dropped_lines() >= 999, "dropped {}", dropped_lines());
        drop(held);
        drop(guard);
        let seen = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        assert!(seen.contains("a line i=0"), "the first lines were written");
    }
}
