"""vLLM 0.33.0 metric names: the one place they are spelled.

Counters are exposed with a ``_total`` suffix and a ``_created`` gauge beside them
(absent in vLLM's multiprocess mode); prometheus-client's parser strips the suffix, so
the parsed family names are the ones below. Labels: ``model_name``, ``engine``; the
per-position family adds ``position`` = "0".."γ-1", fixed at engine start.
"""

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"

SPEC_DECODE_FAMILIES = (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POSITION)

# HELP texts exactly as vLLM's SpecDecodingProm registers them (the simulator serves these).
HELP = {
    DRAFTS: "Number of spec decoding drafts.",
    DRAFT_TOKENS: "Number of draft tokens.",
    ACCEPTED_TOKENS: "Number of accepted tokens.",
    ACCEPTED_PER_POSITION: "Accepted tokens per draft position.",
}

# Step shape and latency: batch mix, the specialized path's eligibility, the model's error.
ITERATION_TOKENS = "vllm:iteration_tokens_total"      # a histogram whose name ends in _total
NUM_REQUESTS_RUNNING = "vllm:num_requests_running"    # gauge
INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"  # histogram; use _sum / _count

# Decode tokens N = generation tokens − first tokens: vLLM counts every output token in
# vllm:generation_tokens and observes vllm:time_to_first_token_seconds once per request, at
# its first token (which the prefill emits); the ITL histogram's count is the decode steps S.
GENERATION_TOKENS = "vllm:generation_tokens"  # counter
TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"  # histogram; its _count is the first tokens
# Per finished request, its prompt and its output length (histograms: _sum / _count): the
# context a decode step reads (acceptance.request_lengths).
REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"
REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"

# vLLM's own estimate of each step's work per GPU, with --enable-mfu-metrics (counters;
# vllm/v1/metrics/perf.py PerfMetricsProm, 0.33): FLOPs, bytes read, bytes written, summed over
# the steps since start (acceptance.engine_cost). They read 0 on the CPU backend.
ESTIMATED_FLOPS = "vllm:estimated_flops_per_gpu"
ESTIMATED_READ_BYTES = "vllm:estimated_read_bytes_per_gpu"
ESTIMATED_WRITE_BYTES = "vllm:estimated_write_bytes_per_gpu"
ENGINE_COST_FAMILIES = (ESTIMATED_FLOPS, ESTIMATED_READ_BYTES, ESTIMATED_WRITE_BYTES)

STEP_SHAPE_FAMILIES = (ITERATION_TOKENS, NUM_REQUESTS_RUNNING, INTER_TOKEN_LATENCY)

ENGINE_LABEL = "engine"
MODEL_NAME_LABEL = "model_name"
POSITION_LABEL = "position"
