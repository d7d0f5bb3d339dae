"""sha256 of corpus ``wikitext2``'s mirror files as published: written by `ctxrep pin wikitext2`."""

SHA256 = {
    "corpus/wikitext-2/wiki.test.tokens": "71d6752432a1aa2b5e33df05aec85d344a0e59e8ff0beed1c03059a0cd85dbba",
    "corpus/wikitext-2/wiki.train.tokens": "c28f69efc7fbf5d20b7ec3b50d1b55598412b21d25db14fe8d754ad8a58f2c7b",
    "corpus/wikitext-2/wiki.valid.tokens": "b792aaa785eb74a7ae98ac9741c022f89ba9b66761e7afc164fb73a6314efad8"
}
