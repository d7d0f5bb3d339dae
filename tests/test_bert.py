"""ctxrep's BERT: configuration, invariances, masked-only decoding and Hugging Face interop."""

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest
import torch
import torch.nn.functional as F

from ctxrep.models.bert import (
    IGNORE_INDEX,
    BertConfig,
    BertForPreTraining,
    BertModel,
    flops_per_token,
)
from ctxrep.models.bert_hf import load_pretrained, save_pretrained
from ctxrep.training.optim import decay_groups

transformers = pytest.importorskip("transformers")

VOCAB = 97


def tiny_config(**overrides) -> BertConfig:
    sizes = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        pre_layer_norm=False,
    )
    return BertConfig(**{**sizes, **overrides}).validate()


def tiny_model(seed: int = 0, **overrides) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(tiny_config(**overrides)).eval()


def padded_batch(seed: int = 0):
    """Three rows of different real lengths, two segments each, padded to 16."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (3, 16), generator=g)
    attention_mask = torch.ones_like(input_ids)
    token_type_ids = torch.zeros_like(input_ids)
    for row, length in enumerate((16, 11, 7)):
        attention_mask[row, length:] = 0
        input_ids[row, length:] = 0
        token_type_ids[row, length // 2 : length] = 1
    return input_ids, token_type_ids, attention_mask


def hf_logits(model, input_ids, token_type_ids, attention_mask):
    with torch.no_grad():
        out = model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
    return out.prediction_logits, out.seq_relationship_logits


@torch.no_grad()
def randomize_(model):
    """Weights far from BERT's small init, so that a swapped or mis-mapped tensor (e.g. query
    for key, whose scores are ~0 at init) changes the outputs well beyond the tolerance."""
    for p in model.parameters():
        p.normal_(0, 0.3)
    return model


def tiny_hf_config() -> transformers.BertConfig:
    """A checkpoint config written by transformers itself, not by ctxrep's exporter."""
    return transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=64,
                                   max_position_embeddings=40)


def max_diff_at_real_tokens(a, b, attention_mask):
    return (a - b)[attention_mask.bool()].abs().max().item()


# ---------------------------------------------------------------------------------------------
# Configuration


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"hidden_size": 30}, "hidden_size"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"num_hidden_layers": -1}, "num_hidden_layers"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"attention_probs_dropout_prob": -0.1}, "attention_probs_dropout_prob"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps"),
        ({"pad_token_id": VOCAB}, "pad_token_id"),
        ({"pre_layer_norm": "yes"}, "pre_layer_norm"),
    ],
)
def test_config_validation_names_the_key(overrides, key):
    with pytest.raises(ValueError, match=key):
        tiny_config(**overrides)


def test_named_sizes_follow_turc_et_al():
    rest = dict(max_position_embeddings=512, hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    mini = BertConfig.named("mini", vocab_size=1000, **rest)
    sizes = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")
    assert tuple(getattr(mini, k) for k in sizes) == (4, 256, 4, 1024)
    base = BertConfig.named("base", vocab_size=1000, **rest)
    assert tuple(getattr(base, k) for k in sizes) == (12, 768, 12, 3072)
    with pytest.raises(ValueError, match="name"):
        BertConfig.named("huge", vocab_size=1000, **rest)


def test_a_model_config_has_no_hyper_parameter_of_its_own():
    """Sizes, dropout and objective come from the params (or a checkpoint): leaving one out is
    an error, never a default that disagrees with conf/."""
    with pytest.raises(TypeError, match="hidden_dropout_prob"):
        BertConfig.named("tiny", vocab_size=10, max_position_embeddings=64,
                         attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    from ctxrep.models.bilm import BiLMConfig

    with pytest.raises(TypeError, match="cell_dim"):
        BiLMConfig(vocab_size=10, char_embed_dim=4, filters=[[1, 4]], n_highway=0,
                   activation="relu", projection_dim=8, n_layers=1, cell_clip=None,
                   proj_clip=None, dropout=0.0, softmax="full", n_negatives=4)


# ---------------------------------------------------------------------------------------------
# Encoder behaviour


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_hidden_states_shapes(pre_layer_norm):
    model = tiny_model(pre_layer_norm=pre_layer_norm).bert
    input_ids, token_type_ids, attention_mask = padded_batch()
    out = model(input_ids, token_type_ids, attention_mask, output_hidden_states=True)
    assert out.last_hidden_state.shape == (3, 16, 32)
    assert out.pooled_output.shape == (3, 32)
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert model(input_ids).hidden_states is None


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_padding_does_not_change_real_token_outputs(pre_layer_norm):
    model = tiny_model(pre_layer_norm=pre_layer_norm)
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, VOCAB, (2, 9), generator=g)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 5:] = 1
    extra = 7  # pad every row with junk ids that attention must ignore
    padded_ids = torch.cat([input_ids, torch.randint(5, VOCAB, (2, extra), generator=g)], dim=1)
    padded_types = torch.cat([token_type_ids, torch.ones(2, extra, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 9), torch.zeros(2, extra)], dim=1).long()
    with torch.no_grad():
        short = model.logits(input_ids, token_type_ids)
        long = model.logits(padded_ids, padded_types, mask)
        short_hidden = model.bert(input_ids, token_type_ids).last_hidden_state
        long_hidden = model.bert(padded_ids, padded_types, mask).last_hidden_state
    assert (short_hidden - long_hidden[:, :9]).abs().max() < 1e-5
    assert (short.mlm_logits - long.mlm_logits[:, :9]).abs().max() < 1e-5
    assert (short.nsp_logits - long.nsp_logits).abs().max() < 1e-5
    # Sanity: without the mask the padding *does* change the outputs.
    assert (model.bert(padded_ids, padded_types).last_hidden_state[:, :9] - short_hidden).abs().max() > 1e-3


def test_dropout_only_in_training():
    model = tiny_model(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    input_ids, token_type_ids, attention_mask = padded_batch()
    with torch.no_grad():
        eval_a = model.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        eval_b = model.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        model.train()
        train = model.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
    assert torch.equal(eval_a, eval_b)
    assert not torch.allclose(eval_a, train)


def test_construction_is_deterministic():
    a, b = tiny_model(seed=3), tiny_model(seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.bert.embeddings.word.weight, tiny_model(seed=4).bert.embeddings.word.weight)


def test_init_follows_bert():
    model = tiny_model(seed=0, initializer_range=0.02)
    word = model.bert.embeddings.word.weight
    assert abs(word[1:].std().item() - 0.02) < 0.002
    assert torch.equal(word[0], torch.zeros(32))  # padding row
    layer = model.bert.layers[0]
    assert torch.equal(layer.attention_norm.weight, torch.ones(32))
    assert torch.equal(layer.feed_forward.up.bias, torch.zeros(64))
    assert torch.equal(model.mlm.bias, torch.zeros(VOCAB))


# ---------------------------------------------------------------------------------------------
# Pretraining forward


def masked_labels(input_ids, attention_mask, seed=0, rate=0.3):
    g = torch.Generator().manual_seed(seed)
    chosen = (torch.rand(input_ids.shape, generator=g) < rate) & attention_mask.bool()
    return torch.where(chosen, input_ids, IGNORE_INDEX)


def test_masked_only_decoding_equals_decoding_everything_then_selecting():
    model = tiny_model()
    input_ids, token_type_ids, attention_mask = padded_batch()
    labels = masked_labels(input_ids, attention_mask)
    nsp_labels = torch.tensor([0, 1, 1])
    out = model(input_ids, token_type_ids, attention_mask, labels, nsp_labels)
    full = model.logits(input_ids, token_type_ids, attention_mask)
    expected_mlm = F.cross_entropy(full.mlm_logits.view(-1, VOCAB), labels.view(-1))
    expected_nsp = F.cross_entropy(full.nsp_logits, nsp_labels)
    assert abs(out.mlm_loss.item() - expected_mlm.item()) < 1e-5
    assert abs(out.nsp_loss.item() - expected_nsp.item()) < 1e-6
    assert abs(out.loss.item() - (expected_mlm + expected_nsp).item()) < 1e-5
    is_masked = labels != IGNORE_INDEX
    assert out.mlm_count.item() == is_masked.sum().item()
    assert out.mlm_correct.item() == (full.mlm_logits.argmax(-1)[is_masked] == labels[is_masked]).sum().item()
    assert out.nsp_count.item() == 3
    assert out.nsp_correct.item() == (full.nsp_logits.argmax(-1) == nsp_labels).sum().item()

    # Same gradients too: the tied embedding gets its decoder gradient from masked rows only.
    out.loss.backward()
    masked_grad = model.bert.embeddings.word.weight.grad.clone()
    model.zero_grad()
    (expected_mlm + expected_nsp).backward()
    assert (masked_grad - model.bert.embeddings.word.weight.grad).abs().max() < 1e-6


def test_mlm_only_and_empty_mask():
    model = tiny_model()
    input_ids, token_type_ids, attention_mask = padded_batch()
    out = model(input_ids, token_type_ids, attention_mask, labels=masked_labels(input_ids, attention_mask))
    assert out.nsp_loss is None and torch.equal(out.loss, out.mlm_loss)
    nothing_masked = torch.full_like(input_ids, IGNORE_INDEX)
    out = model(input_ids, token_type_ids, attention_mask, labels=nothing_masked)
    assert out.mlm_loss.item() == 0.0 and out.mlm_count.item() == 0


def test_training_step_reduces_loss_and_bf16_autocast_runs():
    model = tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    input_ids, token_type_ids, attention_mask = padded_batch()
    labels = masked_labels(input_ids, attention_mask, rate=0.5)
    nsp_labels = torch.tensor([0, 1, 0])
    optimizer = torch.optim.AdamW(decay_groups(model, 0.01), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = model(input_ids, token_type_ids, attention_mask, labels, nsp_labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids, token_type_ids, attention_mask, labels, nsp_labels)
    assert out.loss.dtype == torch.float32 and torch.isfinite(out.loss)


def explicit_attention(attention, x, key_mask):
    """softmax(Q K^T / sqrt(d) + M) V with the score matrix written out, in float64: the formula
    the SDPA kernel must compute (whichever backend torch picks for the device and dtype)."""
    batch, length, hidden = x.shape
    heads = attention.num_heads
    qkv = F.linear(x.double(), attention.qkv.weight.double(), attention.qkv.bias.double())
    q, k, v = qkv.view(batch, length, 3, heads, -1).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-1, -2) / (hidden // heads) ** 0.5
    scores = scores.masked_fill(~key_mask, float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, hidden)
    return F.linear(y, attention.out.weight.double(), attention.out.bias.double())


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_sdpa_attention_equals_explicit_attention(precision):
    """The SDPA call (CUDA's flash/efficient kernels, CPU's flash kernel or the math path) against
    the explicit formula, with padded keys, in value and in gradient; bf16 as autocast runs it."""
    attention = tiny_model().bert.layers[0].attention.eval()
    _, _, attention_mask = padded_batch()
    key_mask = attention_mask.bool()[:, None, None, :]
    x = torch.randn(3, 16, 32, generator=torch.Generator().manual_seed(1), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        y = attention(x, key_mask)
    expected = explicit_attention(attention, x, key_mask)
    tolerance = 1e-5 if precision == "fp32" else 5e-2  # bf16: 8 bits of mantissa
    real = attention_mask.bool()
    assert (y.double() - expected)[real].abs().max() <= tolerance * expected.abs().max()
    # a loss on the real positions' outputs only (a padded query's output is never read)
    weights = torch.randn(y.shape, generator=torch.Generator().manual_seed(2)) * real[..., None]
    (grad,) = torch.autograd.grad((y.float() * weights).sum(), x)
    (grad_expected,) = torch.autograd.grad((expected * weights.double()).sum(), x)
    assert (grad.double() - grad_expected).abs().max() <= tolerance * grad_expected.abs().max()
    if precision == "fp32":  # padded keys take no attention weight: their inputs get no gradient
        assert grad[~real].abs().max() == 0


def test_decay_groups_exempt_biases_and_layernorm():
    model = tiny_model()
    decay, no_decay = decay_groups(model, 0.01)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    ids = lambda group: {id(p) for p in group["params"]}  # noqa: E731
    assert ids(decay) | ids(no_decay) == {id(p) for p in model.parameters()}
    assert not ids(decay) & ids(no_decay)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert all(id(m.weight) in ids(no_decay) and id(m.bias) in ids(no_decay) for m in norms)
    assert id(model.mlm.bias) in ids(no_decay)
    assert id(model.bert.embeddings.word.weight) in ids(decay)
    assert id(model.bert.layers[0].attention.qkv.weight) in ids(decay)


def test_flops_per_token_counts_the_encoder_matmuls():
    config = tiny_config()
    model = BertModel(config)
    encoder_matrix_params = sum(
        m.weight.numel() for layer in model.layers for m in layer.modules() if isinstance(m, torch.nn.Linear)
    )
    no_attention_no_head = flops_per_token(config, seq_len=0, masked_fraction=0.0)
    assert no_attention_no_head == 6 * encoder_matrix_params
    attention = flops_per_token(config, 128, 0.0) - no_attention_no_head
    assert attention == 6 * config.num_hidden_layers * 2 * 128 * config.hidden_size
    head = flops_per_token(config, 0, 0.15) - no_attention_no_head
    assert head == pytest.approx(6 * 0.15 * (32 * 32 + 32 * VOCAB))


# ---------------------------------------------------------------------------------------------
# Hugging Face interop


def test_export_loads_in_transformers_with_same_logits(tmp_path):
    model = randomize_(tiny_model(seed=5))
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertForPreTraining"]
    theirs, info = transformers.BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    theirs.eval()
    batch = padded_batch(seed=2)
    ours = model.logits(*batch)
    mlm, nsp = hf_logits(theirs, *batch)
    assert max_diff_at_real_tokens(ours.mlm_logits.detach(), mlm, batch[2]) <= 1e-4
    assert (ours.nsp_logits.detach() - nsp).abs().max() <= 1e-4


@pytest.mark.parametrize("weights_format", ["safetensors", "bin_tf_names"])
def test_import_of_a_transformers_checkpoint_gives_same_logits(tmp_path, weights_format):
    torch.manual_seed(7)
    hf_config = tiny_hf_config()
    theirs = randomize_(transformers.BertForPreTraining(hf_config).eval())
    theirs.save_pretrained(tmp_path)
    if weights_format == "bin_tf_names":  # old checkpoints: pytorch_model.bin, LayerNorm gamma/beta
        state = {}
        for name, tensor in theirs.state_dict().items():
            if "LayerNorm" in name:
                name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
            state[name] = tensor
        (tmp_path / "model.safetensors").unlink()
        torch.save(state, tmp_path / "pytorch_model.bin")
    ours = load_pretrained(tmp_path)
    batch = padded_batch(seed=3)
    mlm, nsp = hf_logits(theirs, *batch)
    with torch.no_grad():
        got = ours.logits(*batch)
    assert max_diff_at_real_tokens(got.mlm_logits, mlm, batch[2]) <= 1e-4
    assert (got.nsp_logits - nsp).abs().max() <= 1e-4


def test_import_of_an_encoder_only_checkpoint(tmp_path):
    torch.manual_seed(8)
    hf_config = tiny_hf_config()
    encoder = randomize_(transformers.BertModel(hf_config).eval())
    encoder.save_pretrained(tmp_path)
    ours = load_pretrained(tmp_path).bert
    batch = padded_batch(seed=4)
    with torch.no_grad():
        expected = encoder(input_ids=batch[0], token_type_ids=batch[1], attention_mask=batch[2])
        got = ours(*batch)
    assert max_diff_at_real_tokens(got.last_hidden_state, expected.last_hidden_state, batch[2]) <= 1e-5
    assert (got.pooled_output - expected.pooler_output).abs().max() <= 1e-5


def test_import_rejects_unknown_tensors_and_activations(tmp_path):
    model = tiny_model()
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="hidden_act"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    with pytest.raises(ValueError, match="encoder.layer.1"):  # layer 1's tensors are unexpected
        load_pretrained(tmp_path)


def test_pre_layer_norm_export_raises(tmp_path):
    with pytest.raises(ValueError, match="pre_layer_norm"):
        save_pretrained(tiny_model(pre_layer_norm=True), tmp_path)
    assert not (tmp_path / "model.safetensors").exists()


def test_autotokenizer_loads_the_saved_directory(tmp_path):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    corpus = ["The quick brown fox jumps over the lazy dog.", "Dogs and foxes are not friends, mostly."] * 20
    tokenizer.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials))
    vocab = tokenizer.get_vocab()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer_dir.mkdir()
    tokenizer.save(str(tokenizer_dir / "tokenizer.json"))
    (tokenizer_dir / "vocab.txt").write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])))

    model_dir = tmp_path / "model"
    save_pretrained(tiny_model(vocab_size=len(vocab)), model_dir, tokenizer_dir=tokenizer_dir, do_lower_case=True)
    loaded = transformers.AutoTokenizer.from_pretrained(model_dir)
    text = "The LAZY fox, mostly."
    assert loaded(text)["input_ids"] == tokenizer.encode(text).ids
    assert loaded(text)["input_ids"][0] == vocab["[CLS]"] and loaded(text)["input_ids"][-1] == vocab["[SEP]"]
    assert loaded.mask_token_id == vocab["[MASK]"] and loaded.pad_token_id == vocab["[PAD]"]
    assert loaded("a", "b")["token_type_ids"] == tokenizer.encode("a", "b").type_ids
    # And the model directory still loads as a model next to its tokenizer.
    transformers.BertForPreTraining.from_pretrained(model_dir)
