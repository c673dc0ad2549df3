//! Which failed attempts are tried again, and after how long: exponential backoff (`backon`),
//! with the server's `retry-after-ms` or `Retry-After` (seconds or an HTTP date) winning, each
//! wait capped at [`MAX_RETRY_DELAY`] and logged at `warn`.

use std::future::Future;
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use reqwest::header::{HeaderMap, RETRY_AFTER};

use seam_agent::model::ModelError;

/// Longest wait between two attempts, whatever the backoff or `Retry-After` asks for.
pub(super) const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// How one attempt failed.
pub(super) enum Failure {
    /// A status worth retrying (429, 5xx).
    Retry {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// No answer began: the endpoint could not be reached, or did not answer in time. Worth
    /// retrying; reported as the error if the retries run out.
    Unreached(ModelError),
    /// Anything else: reported as is.
    Fatal(ModelError),
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Self {
        Failure::Fatal(e)
    }
}

impl Failure {
    fn retryable(&self) -> bool {
        !matches!(self, Failure::Fatal(_))
    }

    /// What the warn line says happened.
    fn why(&self) -> String {
        match self {
            Failure::Retry { status, .. } => format!("the model endpoint answered HTTP {status}"),
            Failure::Unreached(e) | Failure::Fatal(e) => e.to_string(),
        }
    }

    fn into_error(self) -> ModelError {
        match self {
            Failure::Retry { status, body, .. } => ModelError::Http { status, body },
            Failure::Unreached(e) | Failure::Fatal(e) => e,
        }
    }
}

/// How a call retries.
pub(super) struct Policy<'a> {
    /// The model name, for the log.
    pub(super) model: &'a str,
    /// Retries after the first attempt.
    pub(super) max_retries: u32,
    /// The first backoff delay, doubled for each next one.
    pub(super) backoff_ms: u64,
}

/// Runs `attempt` until it succeeds, fails for good, or the retries run out.
pub(super) async fn retrying<T, F, Fut>(policy: Policy<'_>, attempt: F) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(policy.backoff_ms))
        .with_factor(2.0)
        .with_max_delay(MAX_RETRY_DELAY)
        .with_max_times(policy.max_retries as usize);
    let mut retry = 0u32;
    attempt
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(Failure::retryable)
        // `None` means the retries ran out: a `Retry-After` does not add one.
        .adjust(|failure, delay| {
            let asked = match failure {
                Failure::Retry { retry_after, .. } => *retry_after,
                _ => None,
            };
            delay.map(|d| asked.unwrap_or(d).min(MAX_RETRY_DELAY))
        })
        .notify(|failure, delay| {
            retry += 1;
            tracing::warn!(
                model = %policy.model,
                retry,
                of = policy.max_retries,
                "{}; retry {retry} of {} in {} ms",
                failure.why(),
                policy.max_retries,
                delay.as_millis()
            );
        })
        .await
        .map_err(Failure::into_error)
}

/// How long the server asks to wait: `retry-after-ms` (milliseconds), else `Retry-After` in
/// seconds or as an HTTP date (`now` turns a date into a wait).
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let at = |pairs| retry_after(&headers(pairs), now);
        assert_eq!(
            at(&[("retry-after-ms", "1500")]),
            Some(Duration::from_millis(1500))
        );
        // Milliseconds win over seconds.
        assert_eq!(
            at(&[("retry-after-ms", "20"), ("retry-after", "9")]),
            Some(Duration::from_millis(20))
        );
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
            Some(Duration::from_secs(30))
        );
        // A date in the past means now.
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(at(&[("retry-after-ms", "-1")]), None);
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[]), None);
    }
}
