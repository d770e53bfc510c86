/*
Fuzz target: llm.c's gpt2_tokenizer.bin (tokenizer.h) through both of its readers: tokenizer_init +
tokenizer_decode (the trainers' samples) and GPT2Encoder::load_llmc (encode_text -t). Input: the
whole file. An encoder that loads must round-trip text: decode(encode(x)) == x (tokenizer.h
promises it for every byte string).
*/
#include "../../tokenizer.h"
#include "fuzz_common.h"
#include "fuzz_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz_write("input.bin", data, size);
    Tokenizer t;
    tokenizer_init(&t, path.c_str());
    if (t.init_ok) {
        for (unsigned i = 0; i < t.vocab_size; i++) {
            const char* s = tokenizer_decode(&t, i);
            FUZZ_CHECK(s != NULL, "token %u of %u has no bytes", i, t.vocab_size);
            safe_printf(s); // stdout is closed by -close_fd_mask
        }
        FUZZ_CHECK(tokenizer_decode(&t, t.vocab_size) == NULL, "id past the vocabulary decoded");
    } else {
        FUZZ_CHECK(t.token_table == NULL && t.vocab_size == 0, "failed init keeps a table");
    }
    tokenizer_free(&t);

    // one encoder for the whole run: every load starts with clear(), so reloading is tested too, and
    // its 1 MB cache is not allocated afresh for each input (which made this target 10x slower)
    static GPT2Encoder* encoder = new GPT2Encoder();
    GPT2Encoder& enc = *encoder;
    std::string err;
    if (enc.load_llmc(path.c_str(), &err)) {
        fuzz_check_round_trip(&enc, "Hello world, it's 2024!<|endoftext|> \xff\xc3\xa9  \n\n x");
        fuzz_check_round_trip(&enc, std::string((const char*)data, size < 512 ? size : 512));
    } else {
        fuzz_check_message(err.c_str());
    }
    return 0;
}
