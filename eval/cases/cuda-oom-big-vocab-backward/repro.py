"""Fine-tuning a small decoder LM with a very large vocabulary.

The forward pass fits: the fp32 logits (batch x seq x vocab) plus the saved
log-softmax take ~2/3 of the GPU. Backward then needs the gradient of the
log-softmax *and* the gradient of the logits, each as large again, and runs out
of memory inside loss.backward(). Tokens per batch are derived from the GPU's
memory so the repro behaves the same on any card.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("finetune")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

VOCAB = 262144
D_MODEL = 512
BATCH = 8


class DecoderLM(nn.Module):
    def __init__(self, vocab=VOCAB, d=D_MODEL, n_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, nhead=8, dim_feedforward=4 * d, batch_first=True,
                                           norm_first=True)
        self.layers = nn.TransformerEncoder(layer, n_layers)
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        T = input_ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=input_ids.device)
        h = self.layers(self.embed(input_ids), mask=mask, is_causal=True)
        return self.lm_head(self.norm(h))


def main():
    total = torch.cuda.get_device_properties(0).total_memory
    # fp32 logits for one batch ~= 1/3 of the card
    tokens_per_batch = int(total / 3 / (VOCAB * 4))
    seq_len = tokens_per_batch // BATCH
    log.info("batch %d x seq_len %d, vocab %d", BATCH, seq_len, VOCAB)

    model = DecoderLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(3):
        ids = torch.randint(0, VOCAB, (BATCH, seq_len + 1), device=device)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.view(-1, VOCAB), ids[:, 1:].reshape(-1))
        log.info("step %d forward ok, loss %.3f, allocated %.1f GiB", step, loss.item(),
                 torch.cuda.memory_allocated() / 2**30)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
