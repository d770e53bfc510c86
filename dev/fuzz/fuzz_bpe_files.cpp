/*
Fuzz target: OpenAI's encoder.json + vocab.bpe (tokenizer.h GPT2Encoder::load_openai, which the
trainers' --prompt and encode_text use). Input: encoder.json, a NUL byte, vocab.bpe (no NUL: an
empty vocab.bpe). An encoder that loads must round-trip text: decode(encode(x)) == x.
*/
#include "../../tokenizer.h"
#include "fuzz_common.h"
#include "fuzz_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint8_t* nul = (const uint8_t*)memchr(data, 0, size);
    const size_t json_size = nul != NULL ? (size_t)(nul - data) : size;
    const std::string json = fuzz_write("encoder.json", data, json_size);
    const std::string bpe = fuzz_write("vocab.bpe", nul != NULL ? nul + 1 : data, nul != NULL ? size - json_size - 1 : 0);
    // one encoder for the whole run: every load starts with clear(), so reloading is tested too, and
    // its 1 MB cache is not allocated afresh for each input (which made this target 10x slower)
    static GPT2Encoder* encoder = new GPT2Encoder();
    GPT2Encoder& enc = *encoder;
    std::string err;
    if (enc.load_openai(json.c_str(), bpe.c_str(), &err)) {
        fuzz_check_round_trip(&enc, "Hello world, it's 2024!<|endoftext|> \xff\xc3\xa9  \n\n x");
        fuzz_check_round_trip(&enc, std::string((const char*)data, size < 512 ? size : 512));
    } else {
        fuzz_check_message(err.c_str());
    }
    return 0;
}
