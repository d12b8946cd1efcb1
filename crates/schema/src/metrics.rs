//! The vocabulary of `samples.metric`: canonical names, units and meaning.
//!
//! Adapters map each framework's own metric names onto these; a name outside the list is a bug in the adapter,
//! which the adapters' tests check with [`is_known`].

/// One canonical engine metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDoc {
    /// Canonical name, stored in `samples.metric`.
    pub name: &'static str,
    /// Unit of `samples.value`.
    pub unit: &'static str,
    /// What it measures.
    pub doc: &'static str,
}

macro_rules! metrics {
    ($($konst:ident = $name:literal, $unit:literal, $doc:literal;)*) => {
        $(
            #[doc = $doc]
            pub const $konst: &str = $name;
        )*
        /// Every canonical metric, in documentation order.
        pub const ALL: &[MetricDoc] = &[$(MetricDoc { name: $name, unit: $unit, doc: $doc }),*];
    };
}

metrics! {
    PROMPT_THROUGHPUT_TPS = "prompt_throughput_tps", "tokens/s", "Prompt (prefill) tokens processed per second over the engine's logging interval.";
    GENERATION_THROUGHPUT_TPS = "generation_throughput_tps", "tokens/s", "Generated tokens per second over the engine's logging interval.";
    REQUESTS_RUNNING = "requests_running", "requests", "Requests in the running batch.";
    REQUESTS_WAITING = "requests_waiting", "requests", "Requests queued, waiting to be scheduled.";
    REQUESTS_SWAPPED = "requests_swapped", "requests", "Requests preempted and swapped out to host memory.";
    KV_CACHE_USAGE = "kv_cache_usage", "fraction", "Fraction (0..1) of accelerator KV-cache blocks in use.";
    CPU_KV_CACHE_USAGE = "cpu_kv_cache_usage", "fraction", "Fraction (0..1) of host KV-cache blocks in use.";
    REQUESTS_DEFERRED = "requests_deferred", "requests", "Waiting requests the scheduler skipped this step (vLLM `Deferred`).";
    PREEMPTIONS = "preemptions", "requests", "Requests preempted during the logging interval.";
    PREFIX_CACHE_HIT_RATE = "prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens found in the accelerator prefix cache over the engine's window (vLLM V1: the last ~1,000 requests).";
    CPU_PREFIX_CACHE_HIT_RATE = "cpu_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens found in the host (CPU) prefix cache.";
    EXTERNAL_PREFIX_CACHE_HIT_RATE = "external_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens served by an external KV connector (LMCache, NIXL, …).";
    MM_CACHE_HIT_RATE = "mm_cache_hit_rate", "fraction", "Fraction (0..1) of multimodal encoder inputs found in the multimodal cache.";
    KV_FETCH_WAITING = "kv_fetch_waiting", "requests", "Requests whose external KV fetch has not started.";
    KV_FETCH_IN_PROGRESS = "kv_fetch_in_progress", "requests", "Requests with an external KV fetch in progress.";
    KV_FETCH_COMPLETED_WAITING = "kv_fetch_completed_waiting", "requests", "Requests whose external KV fetch completed, waiting to be scheduled.";
    REQUESTS_CORRUPTED = "requests_corrupted", "requests", "Requests whose logits contained NaNs during the interval.";
    KV_CACHE_TOKENS = "kv_cache_tokens", "tokens", "Tokens held in the accelerator KV cache.";
    BATCH_TOKENS = "batch_tokens", "tokens", "Tokens in the batch of one forward pass.";
    BATCH_REQUESTS = "batch_requests", "requests", "Requests in the batch of one forward pass.";
    SPEC_ACCEPT_RATE = "spec_accept_rate", "fraction", "Fraction (0..1) of speculative draft tokens accepted.";
    SPEC_ACCEPT_LENGTH = "spec_accept_length", "tokens", "Mean tokens accepted per speculative step.";
    SPEC_ACCEPTED_TOKENS = "spec_accepted_tokens", "tokens", "Draft tokens accepted during the interval.";
    SPEC_DRAFTED_TOKENS = "spec_drafted_tokens", "tokens", "Draft tokens proposed during the interval.";
    SPEC_ACCEPTED_TPS = "spec_accepted_tps", "tokens/s", "Draft tokens accepted per second.";
    SPEC_DRAFTED_TPS = "spec_drafted_tps", "tokens/s", "Draft tokens proposed per second.";
    GPU_POWER_W = "gpu_power_w", "W", "Accelerator power draw.";
    GPU_UTILIZATION = "gpu_utilization", "fraction", "Fraction (0..1) of time the accelerator was busy.";
    GPU_MEMORY_USED_BYTES = "gpu_memory_used_bytes", "bytes", "Accelerator memory in use.";
}

/// Whether `name` is a canonical metric name.
pub fn is_known(name: &str) -> bool {
    ALL.iter().any(|m| m.name == name)
}
