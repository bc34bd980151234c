"""``tinyflow.distributions``: the probability distributions of ``torch.distributions`` that
training programs use most: Categorical (policy gradients, sampling a language model), Normal
(continuous actions, VAEs with ``rsample``) and Bernoulli.

Each is written with tinyflow's differentiable ops, so ``log_prob``, ``entropy`` and
``rsample`` carry gradients back to the parameters (``probs``/``logits``, ``loc``/``scale``);
``sample`` draws from tinyflow's generator (``tf.manual_seed`` fixes it) and carries none.

    from tinyflow.distributions import Categorical
    m = Categorical(logits=policy(state))
    action = m.sample()
    loss = -m.log_prob(action) * reward
"""
from tinyflow.distributions.bernoulli import Bernoulli
from tinyflow.distributions.categorical import Categorical
from tinyflow.distributions.distribution import Distribution
from tinyflow.distributions.normal import Normal

__all__ = ["Distribution", "Categorical", "Normal", "Bernoulli"]
