//! Closed vocabularies stored as dictionary strings.

use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[doc = $doc:literal])* $variant:ident = $text:literal,)* } default $default:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $text)]
                $variant,
            )*
        }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The stored spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value spelled `text`, if any.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// One line of documentation per value.
            pub const DOCS: &'static [(&'static str, &'static str)] = &[$(($text, concat!($($doc),*)),)*];
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        impl $crate::kind::Text for $name {
            fn from_text(text: &str) -> Option<Self> {
                Self::parse(text)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

    };
}

vocabulary! {
    /// How a request ended.
    Status {
        /// Completed and returned an answer.
        Ok = "ok",
        /// Failed: engine error, HTTP 4xx/5xx, or a failure the source marks.
        Error = "error",
        /// Cancelled by the client or the engine before completion.
        Aborted = "aborted",
        /// Hit a client or server deadline.
        Timeout = "timeout",
        /// The source does not record an outcome (most public traces).
        Unknown = "unknown",
    } default Unknown
}

vocabulary! {
    /// What kind of traffic a request belongs to, when the source says.
    WorkloadClass {
        /// Interactive chat.
        Chat = "chat",
        /// Retrieval-augmented generation.
        Rag = "rag",
        /// Agent or tool loops (coding agents, multi-step tools).
        Agent = "agent",
        /// Offline batch.
        Batch = "batch",
    } default Chat
}

vocabulary! {
    /// Where a KV-cache block lives.
    CacheTier {
        /// Accelerator memory (HBM).
        Gpu = "gpu",
        /// Host DRAM.
        Cpu = "cpu",
        /// Local flash or disk.
        Disk = "disk",
        /// A remote or shared store (another node, a KV service, a parallel file system).
        Remote = "remote",
    } default Gpu
}

vocabulary! {
    /// What happened to cache blocks.
    CacheEventKind {
        /// Blocks were written to the tier.
        Stored = "stored",
        /// Blocks were evicted or freed from the tier.
        Removed = "removed",
        /// The whole tier was cleared.
        Cleared = "cleared",
        /// A request looked blocks up (`hit_blocks` of `blocks` found).
        Lookup = "lookup",
    } default Stored
}

vocabulary! {
    /// What the rows of a `source` are: seen by a server or a client, or made by a program. Not stored: it follows
    /// from `source` ([`SourceKind::of`]). `metrics`, `report` and `compare` show rows of different kinds apart.
    SourceKind {
        /// Seen by a server or a client of a real deployment, or a production trace: every source not listed below.
        Measured = "measured",
        /// Made by a simulator or a replay of a trace: `replay` (`infertrace replay`), `llmservingsim-sim`.
        Simulated = "simulated",
        /// Sampled or planned by a generator: `servegen-synth` (`infertrace synth`), `llmservingsim-workload`.
        Synthetic = "synthetic",
    } default Measured
}

/// Sources whose rows a simulator or a replay made.
pub const SIMULATED_SOURCES: &[&str] = &["replay", "llmservingsim-sim"];
/// Sources whose rows a generator sampled or planned.
pub const SYNTHETIC_SOURCES: &[&str] = &["servegen-synth", "llmservingsim-workload"];

impl SourceKind {
    /// The kind of the rows of `source`.
    pub fn of(source: &str) -> SourceKind {
        if SIMULATED_SOURCES.contains(&source) {
            SourceKind::Simulated
        } else if SYNTHETIC_SOURCES.contains(&source) {
            SourceKind::Synthetic
        } else {
            SourceKind::Measured
        }
    }
}

vocabulary! {
    /// How the times of one input relate to real UTC time.
    ClockDomain {
        /// Absolute instants with an explicit zone in the input.
        Utc = "utc",
        /// Absolute wall-clock instants without a zone; the `utc_offset` assumption was applied.
        AssumedOffset = "assumed-offset",
        /// Offsets from the start of the trace; the `start` assumption was added.
        Relative = "relative",
    } default Utc
}
