"""llama.cpp's own HTTP server (llama-server), from PyPI's prebuilt `xllamacpp` wheel, on
one address until it is stopped. `scripts/with-local-model` starts it; run by hand as

    python3 scripts/local-model-server.py --model M.gguf --alias NAME --port 8080

The wheel is built for any x86-64 CPU with AVX2 (no AVX-512, no AMX, not the build
machine's own instruction set), so it runs the same on every machine and installs in
seconds instead of compiling llama.cpp. The server is llama.cpp's C++ one: the model's
own chat template (the system message folded into the first turn) and OpenAI's
`json_schema` response format. A request's `max_tokens` is its own: kuuki's
`LLM_MAX_OUTPUT_TOKENS` caps what it asks for.
"""

import argparse
import os
import signal
import sys

import xllamacpp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model's name in requests and /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, default=8192, help="context length in tokens")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.sampling.seed = args.seed
    params.use_jinja = True
    server = xllamacpp.Server(params)
    print(f"local-model-server: {args.alias} on {server.listening_address}", flush=True)
    # The server's threads do the work; this one waits for SIGTERM or SIGINT.
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
