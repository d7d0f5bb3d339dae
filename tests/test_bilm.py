import math
import random
from collections import Counter

import pytest
import torch
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from ctxrep.models import bilm as bilm_module
from ctxrep.models.bilm import (
    BiLM,
    BiLMConfig,
    LstmWithProjection,
    content_width,
    distinct_rows,
    flops_per_token,
    reverse_padded,
)
from ctxrep.models import sampled_softmax as softmax_module
from ctxrep.models.elmo import Elmo
from ctxrep.models.sampled_softmax import (log_uniform_probability, sample_log_uniform_unique,
                                           sampled_softmax_nll)
from ctxrep.text.elmo_chars import batch_to_char_ids, char_ids_mask

CLIPPING = [None, 3.0]  # None: fused nn.LSTM path; 3.0: the explicit clipped cell


def tiny_config(**overrides) -> BiLMConfig:
    sizes = dict(vocab_size=50, char_embed_dim=16, filters=[[1, 4], [2, 4], [3, 8]], n_highway=1,
                 activation="relu", projection_dim=8, cell_dim=16, n_layers=2, cell_clip=None,
                 proj_clip=None, dropout=0.0, softmax="full", n_negatives=8192)
    return BiLMConfig(**{**sizes, **overrides})


def tiny_bilm(clip=None, seed=0, **overrides) -> BiLM:
    torch.manual_seed(seed)
    return BiLM(tiny_config(cell_clip=clip, proj_clip=clip, **overrides)).eval()


def encode(sentences):
    char_ids = batch_to_char_ids(sentences, add_bos_eos=True)
    return char_ids, char_ids_mask(char_ids)


# -----------------------------------------------------------------------------
# config


@pytest.mark.parametrize(
    "overrides, key",
    [
        (dict(projection_dim=32, cell_dim=16), "projection_dim"),
        (dict(activation="gelu"), "activation"),
        (dict(softmax="hierarchical"), "softmax"),
        (dict(softmax="sampled", n_negatives=50), "n_negatives"),
        (dict(filters=[[3]]), "filters"),
        (dict(filters=[[60, 4]]), "filters"),
        (dict(dropout=1.0), "dropout"),
        (dict(cell_clip=-1.0), "cell_clip"),
        (dict(n_layers=0), "n_layers"),
    ],
)
def test_validate_names_the_key(overrides, key):
    with pytest.raises(ValueError, match=rf"BiLMConfig\.{key}="):
        tiny_config(**overrides).validate()


def test_from_dict_rejects_unknown_keys_and_round_trips():
    config = tiny_config(cell_clip=3.0)
    assert BiLMConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="'cell_size'"):
        BiLMConfig.from_dict({**config.to_dict(), "cell_size": 4})
    with pytest.raises(ValueError, match="preset 'huge'"):
        BiLMConfig.preset("huge")


@pytest.mark.parametrize("name, millions", [("small", 13.6), ("medium", 28.0), ("original", 93.6)])
def test_presets_match_published_sizes(name, millions):
    config = BiLMConfig.preset(name)
    with torch.device("meta"):  # count without allocating
        model = BiLM(config)
    # published counts exclude the output softmax; torch's second LSTM bias adds 4 * cell_dim per layer
    encoder_params = model.num_parameters(include_softmax=False) - 2 * config.n_layers * 4 * config.cell_dim
    assert encoder_params / 1e6 == pytest.approx(millions, abs=0.05)
    softmax_params = model.num_parameters() - model.num_parameters(include_softmax=False)
    assert softmax_params == (config.projection_dim + 1) * config.vocab_size


# -----------------------------------------------------------------------------
# components


def test_reverse_padded_reverses_only_real_steps():
    x = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]]).unsqueeze(-1)
    reversed_x = reverse_padded(x, torch.tensor([4, 2]))
    assert reversed_x.squeeze(-1).tolist() == [[4, 3, 2, 1], [6, 5, 0, 0]]
    assert torch.equal(reverse_padded(reversed_x, torch.tensor([4, 2])), x)


def test_clipped_cell_equals_fused_lstm_when_clipping_is_inactive():
    torch.manual_seed(0)
    fused = LstmWithProjection(6, 12, 4)
    explicit = LstmWithProjection(6, 12, 4, cell_clip=1e6, proj_clip=1e6)
    explicit.load_state_dict(fused.state_dict())
    x = torch.randn(3, 7, 6)
    torch.testing.assert_close(explicit(x), fused(x), atol=1e-6, rtol=1e-5)


def test_clipping_bounds_the_projected_state():
    torch.manual_seed(0)
    layer = LstmWithProjection(6, 12, 4, proj_clip=0.01)
    out = layer(torch.randn(2, 5, 6) * 10)
    assert out.abs().max().item() <= 0.01 + 1e-7
    assert out.abs().max().item() == pytest.approx(0.01)  # and the bound is reached


# -----------------------------------------------------------------------------
# the biLM's contracts


@pytest.mark.parametrize("clip", CLIPPING)
def test_forward_states_are_causal_and_backward_states_anti_causal(clip):
    model = tiny_bilm(clip)
    k = 3  # position of the changed word (<S> is position 0)
    a, mask = encode([["the", "cat", "sat", "on", "a", "mat"]])
    b, _ = encode([["the", "cat", "ate", "on", "a", "mat"]])
    out_a, out_b = model(a, mask), model(b, mask)
    for layer in range(2):
        fa, fb = out_a.forward_states[layer][0], out_b.forward_states[layer][0]
        ba, bb = out_a.backward_states[layer][0], out_b.backward_states[layer][0]
        torch.testing.assert_close(fa[:k], fb[:k], atol=0, rtol=0)  # forward state t sees only <= t
        torch.testing.assert_close(ba[k + 1 :], bb[k + 1 :], atol=0, rtol=0)  # backward state t sees only >= t
        for t in range(k, mask.shape[1]):  # ...and the change does reach the states that may see it
            assert not torch.allclose(fa[t], fb[t])
        for t in range(k + 1):
            assert not torch.allclose(ba[t], bb[t])


@pytest.mark.parametrize("clip", CLIPPING)
def test_padding_does_not_change_states(clip):
    model = tiny_bilm(clip)
    short = ["a", "short", "one"]
    alone, alone_mask = encode([short])
    batch, batch_mask = encode([["a", "much", "longer", "sentence", "than", "the", "other"], short])
    out_alone, out_batch = model(alone, alone_mask), model(batch, batch_mask)
    n = alone.shape[1]
    for layer in range(2):
        for states in ("forward_states", "backward_states"):
            mine, padded = getattr(out_alone, states)[layer][0], getattr(out_batch, states)[layer][1]
            torch.testing.assert_close(padded[:n], mine, atol=1e-6, rtol=1e-5)
            assert (padded[n:] == 0).all()


@pytest.mark.parametrize("zeroed_layer", [0, 1])
def test_residual_connections_skip_lstm_layers_but_not_the_token_layer(zeroed_layer):
    model = tiny_bilm()
    with torch.no_grad():  # a zeroed LSTM layer outputs zeros, so its state shows only what bypasses it
        for stack in (model.forward_lm, model.backward_lm):
            for p in stack.layers[zeroed_layer].parameters():
                p.zero_()
    char_ids, mask = encode([["a", "b", "c"]])
    out = model(char_ids, mask)
    for states in (out.forward_states, out.backward_states):
        if zeroed_layer == 0:  # layer 1 has no skip from the token layer
            assert out.token_layer.abs().sum() > 0 and (states[0] == 0).all()
        else:  # layer 2 = 0 + skip from layer 1
            assert states[0].abs().sum() > 0
            torch.testing.assert_close(states[1], states[0], atol=0, rtol=0)


def test_token_layer_is_context_free_and_covers_unseen_words():
    model = tiny_bilm()
    char_ids, mask = encode([["dogs", "bark", "loudly"], ["my", "dogs", "sleep"], ["zxqvj"]])
    tokens = model(char_ids, mask).token_layer
    torch.testing.assert_close(tokens[0, 1], tokens[1, 2], atol=0, rtol=0)  # "dogs" in two contexts
    assert not torch.allclose(tokens[0, 1], tokens[0, 2])
    assert tokens[2, 1].abs().sum() > 0 and torch.isfinite(tokens[2, 1]).all()  # a made-up word


def test_char_cnn_encodes_each_distinct_word_once_with_the_same_values_and_gradients():
    """Encoding each distinct word once (then copying its vector to every occurrence) gives the
    values and the gradients of encoding every token on its own."""
    model = tiny_bilm()
    cnn = model.token_encoder
    char_ids, mask = encode([["the", "dog", "saw", "the", "dog"], ["the", "cat"]])
    tokens = cnn(char_ids, mask)
    tokens.pow(2).sum().backward()
    fast = {name: p.grad.clone() for name, p in cnn.named_parameters()}
    cnn.zero_grad()

    B, T, W = char_ids.shape
    chars = cnn.char_embedding(char_ids.reshape(B * T, W)).transpose(1, 2)  # every token encoded
    features = torch.cat([conv(chars).amax(dim=-1) for conv in cnn.convs], dim=-1)
    each = cnn.projection(cnn.highway(cnn.activation(features))).view(B, T, -1) * mask.unsqueeze(-1)
    each.pow(2).sum().backward()
    torch.testing.assert_close(tokens, each)
    for name, p in cnn.named_parameters():
        torch.testing.assert_close(fast[name], p.grad, rtol=1e-5, atol=1e-4)  # summed in another order


def test_char_cnn_cut_after_the_longest_word_gives_the_full_width_values_and_gradients():
    """The char-CNN runs only up to the longest word plus the widest filter: in float64 its values
    and gradients are those of all max_chars_per_token positions, also where a padding window
    holds a filter's max (its id's embedding made large here), for a word that fills every
    position (nothing cut) and beside a missing word (all ids 0)."""
    model = tiny_bilm().double()
    cnn = model.token_encoder
    with torch.no_grad():
        cnn.char_embedding.weight[261] = 3.0  # the padding id: its windows win some filters' max
    widest = max(width for width, _ in tiny_config().filters)
    W = 50
    sentences = ([["a", "bb", "dog"], ["the", "cat", "sat", "down"]],  # cut at 6 + 3 of 50
                 [["a", "x" * (W - 2)]])  # BOW + 48 bytes + EOW: every position is the word's
    for batch, width in zip(sentences, (6 + widest, W)):
        char_ids, mask = encode(batch)
        words = char_ids.reshape(-1, W)
        assert content_width(words, widest) == width
        grads = []
        for cut in (True, False):
            cnn.zero_grad()
            if cut:
                tokens = cnn(char_ids, mask)
            else:  # every position, every token
                chars = cnn.char_embedding(words).transpose(1, 2)
                features = torch.cat([conv(chars).max(dim=-1).values for conv in cnn.convs], dim=-1)
                tokens = (cnn.projection(cnn.highway(cnn.activation(features)))
                          .view(*mask.shape, -1) * mask.unsqueeze(-1))
            tokens.pow(2).sum().backward()
            grads.append((tokens.detach(), {n: p.grad.clone() for n, p in cnn.named_parameters()}))
        (cut_tokens, cut_grads), (full_tokens, full_grads) = grads
        torch.testing.assert_close(cut_tokens, full_tokens, rtol=1e-12, atol=1e-12)
        for name in full_grads:
            torch.testing.assert_close(cut_grads[name], full_grads[name], rtol=1e-10, atol=1e-12)
        if width < W:  # the padding id won somewhere, so the cut kept a window it had to keep
            assert full_grads["char_embedding.weight"][261].abs().sum() > 0


def test_distinct_rows_are_torch_unique_rows_even_where_two_keys_collide():
    """Rows keyed by a dot product, exact anyway: where two distinct rows share a key (made so
    here from the function's own coefficients) the result is still every distinct row once."""
    generator = torch.Generator().manual_seed(0)
    words = torch.randint(0, 262, (30, 6), generator=generator)
    rows = words[torch.randint(0, 30, (100,), generator=generator)]
    coefficients = torch.randint(1, 2**31, (6,), generator=torch.Generator().manual_seed(0))
    collide = torch.zeros(2, 6, dtype=torch.long)  # c_1 * e_0 and c_0 * e_1: the key c_0 c_1 twice
    collide[0, 0], collide[1, 1] = coefficients[1], coefficients[0]
    for batch in (rows, torch.cat([rows, collide])):
        distinct, inverse = distinct_rows(batch)
        assert torch.equal(distinct[inverse], batch)
        expected = torch.unique(batch, dim=0)
        assert distinct.shape == expected.shape
        assert torch.equal(torch.unique(distinct, dim=0), expected)  # each distinct row once


def random_targets(mask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return torch.randint(0, vocab_size, mask.shape) * mask


def test_exact_nll_equals_direct_log_softmax():
    model = tiny_bilm(softmax="sampled", n_negatives=10)  # exact_nll ignores the training softmax
    char_ids, mask = encode([["a", "b", "c", "d"], ["e", "f"]])
    targets = random_targets(mask, 50)
    out = model(char_ids, mask)
    log_probs_fwd = F.log_softmax(model.softmax(out.forward_states[-1]), dim=-1)
    log_probs_bwd = F.log_softmax(model.softmax(out.backward_states[-1]), dim=-1)
    forward = backward = 0.0
    for b, length in enumerate(mask.sum(1).tolist()):
        for t in range(length - 1):
            forward -= log_probs_fwd[b, t, targets[b, t + 1]]
            backward -= log_probs_bwd[b, t + 1, targets[b, t]]
    result = model.exact_nll(char_ids, targets, mask)
    torch.testing.assert_close(result.forward_nll, forward.detach())
    torch.testing.assert_close(result.backward_nll, backward.detach())
    assert result.forward_tokens.item() == result.backward_tokens.item() == (6 - 1) + (4 - 1)


def test_full_softmax_loss_is_exact_nll_and_trains_both_directions():
    model = tiny_bilm()
    char_ids, mask = encode([["a", "b", "c"], ["d"]])
    targets = random_targets(mask, 50)
    loss = model.lm_loss(char_ids, targets, mask)
    exact = model.exact_nll(char_ids, targets, mask)
    torch.testing.assert_close(loss.forward_nll.detach(), exact.forward_nll)
    torch.testing.assert_close(loss.backward_nll.detach(), exact.backward_nll)
    loss.loss.backward()
    for stack in (model.forward_lm, model.backward_lm, model.token_encoder):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in stack.parameters())


def test_log_uniform_sampler_matches_its_distribution():
    torch.manual_seed(0)
    vocab_size, draws = 10, 4000
    counts = torch.zeros(vocab_size)
    for _ in range(draws):  # with n=1 the sample is the first draw of the sequence
        ids, num_tries = sample_log_uniform_unique(1, vocab_size, torch.device("cpu"))
        assert num_tries.item() == 1
        counts[ids] += 1
    expected = log_uniform_probability(torch.arange(vocab_size), vocab_size).float()
    torch.testing.assert_close(expected.sum(), torch.tensor(1.0))
    torch.testing.assert_close(counts / draws, expected, atol=0.03, rtol=0)
    ids, num_tries = sample_log_uniform_unique(30, 40, torch.device("cpu"))
    assert len(set(ids.tolist())) == 30 and 0 <= ids.min() and ids.max() < 40 and num_tries >= 30


@pytest.fixture
def one_thread():
    """Tiny matmuls gain nothing from threads, and lose a lot when other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sampled_softmax_formula(monkeypatch):
    torch.manual_seed(0)
    V, candidates, num_tries = 6, [0, 1, 2], 5
    monkeypatch.setattr(softmax_module, "sample_log_uniform_unique",
                        lambda n, vocab_size, device: (torch.tensor(candidates), torch.tensor(num_tries)))
    output = torch.nn.Linear(4, V)
    hidden, targets = torch.randn(3, 4), torch.tensor([0, 2, 5])
    nll = sampled_softmax_nll(hidden, targets, output, n_negatives=3)

    def corrected_logit(row: int, word: int) -> float:
        p = math.log((word + 2) / (word + 1)) / math.log(V + 1)
        expected_count = 1 - (1 - p) ** num_tries
        return (output.weight[word] @ hidden[row] + output.bias[word]).item() - math.log(expected_count)

    for row, target in enumerate(targets.tolist()):
        true = corrected_logit(row, target)
        negatives = [corrected_logit(row, c) for c in candidates if c != target]  # accidental hits removed
        expected = torch.logsumexp(torch.tensor([true, *negatives]), 0).item() - true
        assert nll[row].item() == pytest.approx(expected, abs=1e-5)


def test_sampled_softmax_gradients_match_the_same_formula_in_autograd_ops(monkeypatch):
    """The fused function (softmax kept from forward, backward one scaling of it) against the
    loss written as plain ops, in float64: values and the gradients at h, W and b, hits included."""
    generator = torch.Generator().manual_seed(0)
    V, S, N, P = 40, 12, 30, 8
    candidates = torch.randperm(V, generator=generator)[:S]
    monkeypatch.setattr(softmax_module, "sample_log_uniform_unique",
                        lambda n, vocab_size, device: (candidates, torch.tensor(25)))
    output = torch.nn.Linear(P, V).double()
    hidden = torch.randn(N, P, generator=generator, dtype=torch.float64, requires_grad=True)
    targets = torch.cat([candidates[:5], torch.randint(0, V, (N - 5,), generator=generator)])  # 5+ hits

    def by_autograd_ops():
        p = softmax_module.log_uniform_probability(torch.arange(V), V)
        logits = hidden @ output.weight.T + output.bias - torch.log(-torch.expm1(25 * torch.log1p(-p)))
        true = logits.gather(1, targets.unsqueeze(1)).squeeze(1)
        negatives = logits[:, candidates].masked_fill(candidates == targets.unsqueeze(1), float("-inf"))
        return torch.logsumexp(torch.cat([true.unsqueeze(1), negatives], 1), 1) - true

    weights = torch.rand(N, dtype=torch.float64, generator=generator)  # a different gradient per row
    results = []
    for loss in (lambda: sampled_softmax_nll(hidden, targets, output, n_negatives=S), by_autograd_ops):
        hidden.grad = None
        output.zero_grad()
        nll = loss()
        (nll * weights).sum().backward()
        results.append([nll.detach(), hidden.grad, output.weight.grad, output.bias.grad])
    assert (candidates.unsqueeze(0) == targets.unsqueeze(1)).any(1).sum() >= 5
    for fused, plain in zip(*results):
        torch.testing.assert_close(fused, plain, rtol=1e-10, atol=1e-12)


def test_sampled_softmax_gradient_is_bitwise_reproducible_with_threads():
    """Many rows share a target (frequent words): their gradients must add up in a fixed order.

    At this size a ``weight[targets]`` lookup backpropagates through parallel atomic adds on
    CPU, and the weights of two identical runs drift apart (seen at the default profile)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generator = torch.Generator().manual_seed(0)
        hidden = torch.randn(4096, 64, generator=generator)
        targets = torch.randint(0, 20, (4096,), generator=generator)  # ~200 rows per word
        output = torch.nn.Linear(64, 1000)
        grads = []
        for _ in range(8):
            torch.manual_seed(1)  # the same negatives every time
            output.zero_grad()
            sampled_softmax_nll(hidden, targets, output, n_negatives=100).sum().backward()
            grads.append((output.weight.grad.clone(), output.bias.grad.clone()))
    finally:
        torch.set_num_threads(threads)
    for weight_grad, bias_grad in grads[1:]:
        assert torch.equal(weight_grad, grads[0][0]) and torch.equal(bias_grad, grads[0][1])


def test_sampled_softmax_learns_the_unigram_distribution(one_thread):
    # A bias-only model fitted to Zipf-distributed words: softmax(b) should approach the true
    # distribution. Full softmax reaches KL ~0.01; without the log Q correction KL is ~0.7.
    torch.manual_seed(0)
    V = 500
    p = 1 / torch.arange(1, V + 1, dtype=torch.float64)
    p /= p.sum()
    output = torch.nn.Linear(4, V)
    torch.nn.init.zeros_(output.weight)
    torch.nn.init.zeros_(output.bias)
    optimizer = torch.optim.Adam([output.bias], lr=0.05)
    hidden = torch.zeros(512, 4)
    for _ in range(300):
        nll = sampled_softmax_nll(hidden, torch.multinomial(p, 512, replacement=True), output, n_negatives=64)
        optimizer.zero_grad()
        nll.mean().backward()
        optimizer.step()
    log_q = torch.log_softmax(output.bias.detach().double(), dim=0)
    assert (p * (p.log() - log_q)).sum().item() < 0.05


def toy_corpus(n_sentences: int, n_words: int = 120, seed: int = 0) -> list[list[str]]:
    """Sentences from a Markov chain over Zipf-distributed made-up words: context predicts the next word."""
    rng = random.Random(seed)
    words = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 6)))
                    for _ in range(n_words)})
    zipf = [1 / (rank + 1) for rank in range(len(words))]
    successors = {w: rng.choices(words, weights=zipf, k=3) for w in words}
    sentences = []
    for _ in range(n_sentences):
        sentence = rng.choices(words, weights=zipf)
        for _ in range(rng.randint(3, 9)):
            likely = rng.random() < 0.9
            sentence.append(rng.choice(successors[sentence[-1]]) if likely else rng.choices(words, weights=zipf)[0])
        sentences.append(sentence)
    return sentences


def test_sampled_softmax_trains_as_well_as_full_softmax(one_thread):
    corpus = toy_corpus(800)
    train, heldout = corpus[:600], corpus[600:]
    counts = Counter(w for s in corpus for w in ["<S>", *s, "</S>"])
    word_id = {w: i for i, (w, _) in enumerate(counts.most_common())}  # ids by descending frequency

    def batch(sentences):
        char_ids, mask = encode(sentences)
        targets = torch.zeros(mask.shape, dtype=torch.long)
        for b, s in enumerate(sentences):
            targets[b, : len(s) + 2] = torch.tensor([word_id[w] for w in ["<S>", *s, "</S>"]])
        return char_ids, targets, mask

    batches = [batch(train[i : i + 32]) for i in range(0, len(train), 32)]

    def heldout_perplexity(softmax: str, steps: int = 400) -> float:
        torch.manual_seed(0)
        config = BiLMConfig(vocab_size=len(word_id), char_embed_dim=16, filters=[[1, 8], [2, 8], [3, 16]],
                            n_highway=1, activation="relu", projection_dim=16, cell_dim=32, n_layers=1,
                            cell_clip=None, proj_clip=None, dropout=0.0, softmax=softmax, n_negatives=64)
        model = BiLM(config)
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
        for step in range(steps):
            loss = model.lm_loss(*batches[step % len(batches)]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
        result = model.eval().exact_nll(*batch(heldout))
        return math.exp((result.forward_nll + result.backward_nll).item()
                        / (result.forward_tokens + result.backward_tokens).item())

    full, sampled = heldout_perplexity("full"), heldout_perplexity("sampled")
    assert full < 0.25 * len(word_id)  # it learned the chain (a unigram model is ~50)
    assert sampled == pytest.approx(full, rel=0.15)


# -----------------------------------------------------------------------------
# Elmo feature extractor


def tiny_elmo(clip=None) -> Elmo:
    return Elmo(tiny_bilm(clip), [f"w{i}" for i in range(50)]).eval()


def test_elmo_output_layout():
    elmo = tiny_elmo()
    sentences = [["a", "b", "c"], ["d"]]
    out = elmo(sentences)
    assert out.layers.shape == (2, 3, 3, 16)  # (B, L + 1, T, 2P): <S> and </S> are dropped
    assert out.mask.tolist() == [[True, True, True], [True, False, False]]
    assert (out.layers[1, :, 1:] == 0).all()
    char_ids, mask = encode(sentences)
    states = elmo.bilm(char_ids, mask)
    token = states.token_layer[0, 1:4]
    torch.testing.assert_close(out.layers[0, 0], torch.cat([token, token], -1))
    forward, backward = states.forward_states[1][0, 1:4], states.backward_states[1][0, 1:4]
    torch.testing.assert_close(out.layers[0, 2], torch.cat([forward, backward], -1))
    torch.testing.assert_close(elmo(char_ids).layers, out.layers)  # char ids in, same result
    with pytest.raises(ValueError, match="<S>"):
        elmo(batch_to_char_ids(sentences, add_bos_eos=False))


@pytest.mark.parametrize("clip", CLIPPING)
def test_elmo_is_batch_independent_in_eval_mode(clip):
    elmo = tiny_elmo(clip)
    sentences = [["the", "cat", "sat"], ["a", "much", "longer", "sentence", "here"], ["hi"]]
    batched = elmo(sentences)
    for b, sentence in enumerate(sentences):
        alone = elmo([sentence])
        n = len(sentence)
        torch.testing.assert_close(batched.layers[b, :, :n], alone.layers[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(elmo(sentences).layers, batched.layers, atol=0, rtol=0)  # stateless


def test_elmo_save_load_round_trip(tmp_path):
    elmo = tiny_elmo(clip=3.0)
    elmo.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["char_spec.json", "config.json", "model.safetensors",
                                                          "vocab.txt"]
    loaded = Elmo.from_pretrained(tmp_path)
    assert loaded.vocab == elmo.vocab and loaded.bilm.config == elmo.bilm.config and not loaded.training
    sentences = [["round", "trip"], ["ok"]]
    torch.testing.assert_close(loaded(sentences).layers, elmo(sentences).layers, atol=0, rtol=0)
    (tmp_path / "vocab.txt").write_text("only\ntwo\n")
    with pytest.raises(ValueError, match="vocab has 2 words"):
        Elmo.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        Elmo.from_pretrained(tmp_path)


# -----------------------------------------------------------------------------
# cost model


def test_flops_per_token_matches_counted_flops():
    # the clipped cell runs as plain matmuls, which the counter sees (fused LSTM kernels it does not)
    config = tiny_config(cell_clip=3.0, vocab_size=2000, projection_dim=32, cell_dim=64)
    torch.manual_seed(0)
    model = BiLM(config)
    sentences = [[f"w{i}{j}" for j in range(30)] for i in range(4)]
    char_ids, mask = encode(sentences)
    targets = random_targets(mask, config.vocab_size)
    with FlopCounterMode(display=False) as counter:
        model.lm_loss(char_ids, targets, mask).loss.backward()
    tokens = mask.sum().item()
    per_token = counter.get_total_flops() / tokens
    # executed: the char-CNN once per distinct word, over the positions up to the cut
    words, _ = distinct_rows(char_ids.reshape(tokens, -1))
    chars = content_width(words, max(width for width, _ in config.filters))
    assert chars < config.max_chars_per_token
    char_path_run = 3 * bilm_module.token_encoder_flops(config, chars=chars) * len(words) / tokens
    expected = flops_per_token(config) - 3 * bilm_module.token_encoder_flops(config) + char_path_run
    assert per_token == pytest.approx(expected, rel=0.05)
