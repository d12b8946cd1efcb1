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
    REQUESTS_INFLIGHT = "requests_inflight", "requests", "Requests accepted and not yet finished (queued or running), as a frontend, router or request handler counts them.";
    KV_CACHE_USAGE = "kv_cache_usage", "fraction", "Fraction (0..1) of accelerator KV-cache blocks in use.";
    CPU_KV_CACHE_USAGE = "cpu_kv_cache_usage", "fraction", "Fraction (0..1) of host KV-cache blocks in use.";
    REQUESTS_DEFERRED = "requests_deferred", "requests", "Waiting requests the scheduler skipped this step (vLLM `Deferred`).";
    PREEMPTIONS = "preemptions", "requests", "Requests preempted during the logging interval.";
    PREFIX_CACHE_HIT_RATE = "prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens found in the accelerator prefix cache over the engine's window (vLLM V1: the last ~1,000 requests).";
    CPU_PREFIX_CACHE_HIT_RATE = "cpu_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens found in the host (CPU) prefix cache.";
    DISK_PREFIX_CACHE_HIT_RATE = "disk_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of looked-up KV blocks found in the local disk tier (Dynamo KVBM G3) over the engine's window.";
    REMOTE_PREFIX_CACHE_HIT_RATE = "remote_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of looked-up KV blocks found in a remote or object-storage tier (Dynamo KVBM G4) over the engine's window.";
    EXTERNAL_PREFIX_CACHE_HIT_RATE = "external_prefix_cache_hit_rate", "fraction", "Fraction (0..1) of prompt tokens served by an external KV connector (LMCache, NIXL, …).";
    MM_CACHE_HIT_RATE = "mm_cache_hit_rate", "fraction", "Fraction (0..1) of multimodal encoder inputs found in the multimodal cache.";
    KV_FETCH_WAITING = "kv_fetch_waiting", "requests", "Requests whose external KV fetch has not started.";
    KV_FETCH_IN_PROGRESS = "kv_fetch_in_progress", "requests", "Requests with an external KV fetch in progress.";
    KV_FETCH_COMPLETED_WAITING = "kv_fetch_completed_waiting", "requests", "Requests whose external KV fetch completed, waiting to be scheduled.";
    REQUESTS_CORRUPTED = "requests_corrupted", "requests", "Requests whose logits contained NaNs during the interval.";
    KV_CACHE_TOKENS = "kv_cache_tokens", "tokens", "Tokens held in the accelerator KV cache.";
    SWA_KV_CACHE_USAGE = "swa_kv_cache_usage", "fraction", "Fraction (0..1) of the sliding-window-attention KV pool in use (hybrid models).";
    MAMBA_CACHE_USAGE = "mamba_cache_usage", "fraction", "Fraction (0..1) of the Mamba/SSM state pool in use (hybrid models).";
    PREALLOCATED_KV_CACHE_USAGE = "preallocated_kv_cache_usage", "fraction", "Fraction (0..1) of the KV pool pre-allocated for transfers (PD decode servers).";
    PREFILL_CACHED_TOKENS = "prefill_cached_tokens", "tokens", "Prompt tokens of one prefill batch found in the prefix cache.";
    PENDING_TOKENS = "pending_tokens", "tokens", "Prompt tokens waiting in the queue.";
    REQUESTS_RETRACTED = "requests_retracted", "requests", "Requests retracted (preempted) from the decode batch.";
    REQUESTS_BOOTSTRAPPING = "requests_bootstrapping", "requests", "PD disaggregation: requests waiting for their KV-transfer bootstrap or pre-allocation.";
    REQUESTS_TRANSFERRING = "requests_transferring", "requests", "PD disaggregation: requests whose KV cache is being transferred.";
    BATCH_TOKENS = "batch_tokens", "tokens", "Tokens in the batch of one forward pass.";
    BATCH_REQUESTS = "batch_requests", "requests", "Requests in the batch of one forward pass.";
    SPEC_ACCEPT_RATE = "spec_accept_rate", "fraction", "Fraction (0..1) of speculative draft tokens accepted.";
    SPEC_ACCEPT_LENGTH = "spec_accept_length", "tokens", "Mean tokens accepted per speculative step.";
    SPEC_ACCEPTED_TOKENS = "spec_accepted_tokens", "tokens", "Draft tokens accepted during the interval.";
    SPEC_DRAFTED_TOKENS = "spec_drafted_tokens", "tokens", "Draft tokens proposed during the interval.";
    SPEC_ACCEPTED_TPS = "spec_accepted_tps", "tokens/s", "Draft tokens accepted per second.";
    SPEC_DRAFTED_TPS = "spec_drafted_tps", "tokens/s", "Draft tokens proposed per second.";
    PROMPT_TOKENS_TOTAL = "prompt_tokens_total", "tokens", "Cumulative prompt tokens processed (a counter as scraped).";
    GENERATION_TOKENS_TOTAL = "generation_tokens_total", "tokens", "Cumulative generated tokens (a counter as scraped).";
    PREFIX_CACHE_QUERIES_TOTAL = "prefix_cache_queries_total", "tokens", "Cumulative prompt tokens looked up in the prefix cache.";
    PREFIX_CACHE_HITS_TOTAL = "prefix_cache_hits_total", "tokens", "Cumulative prompt tokens found in the prefix cache.";
    EXTERNAL_PREFIX_CACHE_QUERIES_TOTAL = "external_prefix_cache_queries_total", "tokens", "Cumulative prompt tokens looked up through an external KV connector.";
    EXTERNAL_PREFIX_CACHE_HITS_TOTAL = "external_prefix_cache_hits_total", "tokens", "Cumulative prompt tokens served through an external KV connector.";
    PREEMPTIONS_TOTAL = "preemptions_total", "requests", "Cumulative preemptions.";
    REQUESTS_FINISHED_STOP_TOTAL = "requests_finished_stop_total", "requests", "Cumulative requests finished by a stop condition.";
    REQUESTS_FINISHED_LENGTH_TOTAL = "requests_finished_length_total", "requests", "Cumulative requests finished at their length limit.";
    REQUESTS_FINISHED_ABORT_TOTAL = "requests_finished_abort_total", "requests", "Cumulative requests aborted.";
    REQUESTS_FINISHED_ERROR_TOTAL = "requests_finished_error_total", "requests", "Cumulative requests finished with an error.";
    REQUESTS_FINISHED_REPETITION_TOTAL = "requests_finished_repetition_total", "requests", "Cumulative requests stopped for repetition.";
    TTFT_SECONDS_COUNT = "ttft_seconds_count", "requests", "Cumulative count of the time-to-first-token histogram.";
    TTFT_SECONDS_SUM = "ttft_seconds_sum", "s", "Cumulative sum of the time-to-first-token histogram.";
    INTER_TOKEN_LATENCY_SECONDS_COUNT = "inter_token_latency_seconds_count", "tokens", "Cumulative count of the inter-token latency (time per output token) histogram.";
    INTER_TOKEN_LATENCY_SECONDS_SUM = "inter_token_latency_seconds_sum", "s", "Cumulative sum of the inter-token latency histogram.";
    E2E_LATENCY_SECONDS_COUNT = "e2e_latency_seconds_count", "requests", "Cumulative count of the end-to-end latency histogram.";
    E2E_LATENCY_SECONDS_SUM = "e2e_latency_seconds_sum", "s", "Cumulative sum of the end-to-end latency histogram.";
    QUEUE_TIME_SECONDS_COUNT = "queue_time_seconds_count", "requests", "Cumulative count of the queue-time histogram.";
    QUEUE_TIME_SECONDS_SUM = "queue_time_seconds_sum", "s", "Cumulative sum of the queue-time histogram.";
    PREFILL_TIME_SECONDS_COUNT = "prefill_time_seconds_count", "requests", "Cumulative count of the prefill-time histogram.";
    PREFILL_TIME_SECONDS_SUM = "prefill_time_seconds_sum", "s", "Cumulative sum of the prefill-time histogram.";
    DECODE_TIME_SECONDS_COUNT = "decode_time_seconds_count", "requests", "Cumulative count of the decode-time histogram.";
    DECODE_TIME_SECONDS_SUM = "decode_time_seconds_sum", "s", "Cumulative sum of the decode-time histogram.";
    REQUEST_PROMPT_TOKENS_COUNT = "request_prompt_tokens_count", "requests", "Cumulative count of the per-request prompt-length histogram.";
    REQUEST_PROMPT_TOKENS_SUM = "request_prompt_tokens_sum", "tokens", "Cumulative sum of the per-request prompt-length histogram.";
    REQUEST_GENERATION_TOKENS_COUNT = "request_generation_tokens_count", "requests", "Cumulative count of the per-request output-length histogram.";
    REQUEST_GENERATION_TOKENS_SUM = "request_generation_tokens_sum", "tokens", "Cumulative sum of the per-request output-length histogram.";
    GPU_POWER_W = "gpu_power_w", "W", "Accelerator power draw.";
    GPU_UTILIZATION = "gpu_utilization", "fraction", "Fraction (0..1) of time the accelerator was busy.";
    GPU_MEMORY_USED_BYTES = "gpu_memory_used_bytes", "bytes", "Accelerator memory in use.";
    GPU_MEMORY_FREE_BYTES = "gpu_memory_free_bytes", "bytes", "Accelerator memory free.";
    GPU_ENERGY_JOULES_TOTAL = "gpu_energy_joules_total", "J", "Cumulative energy the accelerator consumed (a counter as scraped; DCGM counts it from the driver's load and resets it when the driver reloads).";
    GPU_DRAM_ACTIVE = "gpu_dram_active", "fraction", "Fraction (0..1) of cycles the accelerator's device memory (HBM) interface was sending or receiving data: memory-bandwidth pressure.";
    PCIE_TX_BYTES_PER_S = "pcie_tx_bytes_per_s", "bytes/s", "Bytes per second the accelerator sent over PCIe, protocol headers included.";
    PCIE_RX_BYTES_PER_S = "pcie_rx_bytes_per_s", "bytes/s", "Bytes per second the accelerator received over PCIe, protocol headers included.";
    NVLINK_TX_BYTES_PER_S = "nvlink_tx_bytes_per_s", "bytes/s", "Bytes per second the accelerator sent over NVLink (all links).";
    NVLINK_RX_BYTES_PER_S = "nvlink_rx_bytes_per_s", "bytes/s", "Bytes per second the accelerator received over NVLink (all links).";
    DISK_READ_BYTES_TOTAL = "disk_read_bytes_total", "bytes", "Cumulative bytes read from one block device (a counter as scraped).";
    DISK_WRITTEN_BYTES_TOTAL = "disk_written_bytes_total", "bytes", "Cumulative bytes written to one block device (a counter as scraped).";
    NETWORK_RECEIVE_BYTES_TOTAL = "network_receive_bytes_total", "bytes", "Cumulative bytes received on one network interface (a counter as scraped).";
    NETWORK_TRANSMIT_BYTES_TOTAL = "network_transmit_bytes_total", "bytes", "Cumulative bytes sent on one network interface (a counter as scraped).";
    CPU_BUSY_SECONDS_TOTAL = "cpu_busy_seconds_total", "s", "Cumulative CPU time neither idle nor waiting for I/O, summed over a host's CPUs (a counter as scraped).";
    CPU_IDLE_SECONDS_TOTAL = "cpu_idle_seconds_total", "s", "Cumulative CPU time idle or waiting for I/O, summed over a host's CPUs (a counter as scraped).";
    CPU_ENERGY_JOULES_TOTAL = "cpu_energy_joules_total", "J", "Cumulative energy a host's CPU packages consumed, summed over its sockets (RAPL `package` domains; a counter as scraped).";
    HOST_MEMORY_TOTAL_BYTES = "host_memory_total_bytes", "bytes", "A host's usable memory.";
    HOST_MEMORY_AVAILABLE_BYTES = "host_memory_available_bytes", "bytes", "A host's memory available to new work without swapping (Linux `MemAvailable`).";
}

/// Whether `name` is a canonical metric name.
pub fn is_known(name: &str) -> bool {
    ALL.iter().any(|m| m.name == name)
}
