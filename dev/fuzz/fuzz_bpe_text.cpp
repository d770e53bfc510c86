/*
Fuzz target: any bytes into the GPT-2 BPE encoder (tokenizer.h) with the real vocabulary:
encode and encode_ordinary must give ids in the vocabulary and decode back to the input
(decode(encode(x)) == x holds for every byte string, valid UTF-8 or not, as tokenizer.h promises).
The vocabulary is loaded once: $FUZZ_GPT2_TOKENIZER, default dev/data/gpt2/gpt2_tokenizer.bin
(bash dev/data/fetch_gpt2_vocab.sh writes it); run from the repository root.
*/
#include "../../tokenizer.h"
#include "fuzz_common.h"

static GPT2Encoder* encoder;

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    const char* path = getenv("FUZZ_GPT2_TOKENIZER");
    if (path == NULL || path[0] == '\0') { path = "dev/data/gpt2/gpt2_tokenizer.bin"; }
    encoder = new GPT2Encoder();
    std::string err;
    if (!encoder->load_llmc(path, &err) || encoder->vocab_size() != 50257) {
        fprintf(stderr, "fuzz_bpe_text: cannot load the GPT-2 vocabulary: %s (HINT: bash dev/data/fetch_gpt2_vocab.sh, "
                "or set FUZZ_GPT2_TOKENIZER)\n", err.empty() ? "not 50257 tokens" : err.c_str());
        exit(1);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text((const char*)data, size);
    std::vector<int> ids = encoder->encode(text);
    for (int id : ids) { FUZZ_CHECK(id >= 0 && id < 50257, "id %d", id); }
    FUZZ_CHECK(encoder->decode(ids) == text, "decode(encode(x)) != x");
    std::vector<int> ord = encoder->encode_ordinary(text);
    for (int id : ord) { FUZZ_CHECK(id >= 0 && id < 50256, "encode_ordinary gave id %d", id); }
    FUZZ_CHECK(encoder->decode(ord) == text, "decode(encode_ordinary(x)) != x");
    // pieces tile the text: each starts where the last ended and moves forward
    for (size_t i = 0; i < size;) {
        const size_t e = GPT2Encoder::next_piece(data, size, i);
        FUZZ_CHECK(e > i && e <= size, "piece at %zu ends at %zu of %zu", i, e, size);
        i = e;
    }
    return 0;
}
