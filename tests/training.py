"""What the training tests share (torch needed; imported only by tests that already have it): a
loop that trains and records each step's loss, and the check that lab's losses track torch's."""


def losses_of_training(loss_of, parameters, batches, lr):
    """AdamW over `parameters`, one step per batch: loss_of(*batch) -> loss. The losses, a tensor."""
    import torch
    optimizer = torch.optim.AdamW(parameters, lr=lr)
    losses = []
    for batch in batches:
        loss = loss_of(*batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses)


def assert_tracks(got, want, tolerance, what="losses"):
    """The reference learned (else the comparison says nothing) and got stays within `tolerance`
    of it, relative, at every step."""
    assert want[-1] < want[0] * 0.8, "the reference model did not learn: the comparison would say nothing"
    relative = ((got - want).abs() / want.abs()).max().item()
    assert relative <= tolerance, f"{what} differ by {relative:.2e} relative (allowed {tolerance})"
