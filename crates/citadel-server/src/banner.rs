//! The startup banner printed to stdout: version, node id, the URLs of
//! every listener, and notes such as the file descriptor budget
//! ([`crate::fdlimit::FdReport::banner_lines`]). Never includes secrets.

use crate::config::{Config, ConfigSource};

/// The bound listeners the banner names (`None` = disabled).
#[derive(Debug, Clone, Copy, Default)]
pub struct Listeners<'a> {
    /// WebSocket `host:port`.
    pub ws: Option<&'a str>,
    /// QUIC `host:port`.
    pub quic: Option<&'a str>,
    /// WebTransport session URL.
    pub webtransport: Option<&'a str>,
}

/// Renders the boxed banner; `notes` are appended after the URLs.
pub fn render(
    config: &Config,
    source: &ConfigSource,
    http: &str,
    listeners: Listeners,
    notes: &[String],
) -> String {
    let ws = listeners.ws;
    let mut lines = vec![
        format!("Citadel {}", env!("CARGO_PKG_VERSION")),
        format!("node      {}", config.server.node_id),
        format!(
            "config    {}",
            match source {
                ConfigSource::File(p) => p.display().to_string(),
                ConfigSource::Defaults => "built-in defaults".to_owned(),
            }
        ),
        String::new(),
        format!("Health    http://{http}/health"),
        format!("Status    http://{http}/status"),
        format!("Metrics   http://{http}/metrics"),
    ];
    match ws {
        Some(ws) => lines.push(format!("WebSocket ws://{ws}/")),
        None => lines.push("WebSocket disabled".to_owned()),
    }
    if let Some(quic) = listeners.quic {
        lines.push(format!("QUIC      {quic} (UDP, ALPN citadel/0)"));
    }
    if let Some(wt) = listeners.webtransport {
        lines.push(format!("WebTrans. {wt}"));
        lines.push(format!("WT cert   http://{http}/v1/webtransport"));
    }
    if !notes.is_empty() {
        lines.push(String::new());
        lines.extend(notes.iter().cloned());
    }
    let width = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2;
    let mut out = format!("╭{}╮\n", "─".repeat(width));
    for line in lines {
        let pad = width - 1 - line.chars().count();
        out.push_str(&format!("│ {line}{}│\n", " ".repeat(pad)));
    }
    out.push_str(&format!("╰{}╯", "─".repeat(width)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_is_boxed_and_names_urls() {
        let text = render(
            &Config::default(),
            &ConfigSource::Defaults,
            "127.0.0.1:7350",
            Listeners {
                ws: Some("127.0.0.1:7352"),
                quic: Some("127.0.0.1:7351"),
                webtransport: Some("https://127.0.0.1:7353/citadel"),
            },
            &["Files     limit 1024, caps need 14234".to_owned()],
        );
        assert!(text.contains("Files     limit 1024"));
        assert!(text.contains("QUIC      127.0.0.1:7351"));
        assert!(text.starts_with('╭') && text.ends_with('╯'));
        assert!(text.contains("ws://127.0.0.1:7352/"));
        assert!(text.contains("dev-1"));
        let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{text}");
    }
}
