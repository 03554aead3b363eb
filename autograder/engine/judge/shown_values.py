"""Values as a student reads them in a few characters (an example's inputs and outputs,
feedback.lines), and as JSON keeps them (plain)."""

import math

import torch

VALUE_CHARS = 70  # one value of an example, at most


def shape_of(value) -> str:
    """The shape shown before a tensor's entries (none where `compact` names it already)."""
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or filled(value) is not None:
        return ""
    return f"{tuple(value.shape)} "


def filled(value):
    """ "zeros" or "ones" for a tensor of only those (shown by its shape alone), else None."""
    try:
        if value.numel() and value.dtype != torch.bool and not value.is_complex():
            for name, number in (("zeros", 0), ("ones", 1)):
                if bool((value.detach() == number).all()):
                    return name
    except Exception:  # noqa: BLE001 - a tensor without values (fake, meta)
        return None
    return None


def compact(value, limit: int = VALUE_CHARS) -> str:
    """A value as few characters show it: a tensor of zeros or ones by its shape alone
    (`zeros(1, 1, 2, 1)`), another by its entries without its leading axes of length 1 (its shape
    is shown beside it), whole numbers without decimals, others to 4 digits."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if filled(value) is not None:
            return f"{filled(value)}{tuple(value.shape)}".replace(",)", ")")
        while value.dim() > 2 and value.shape[0] == 1:
            value = value[0]
        try:
            text = nested(value.cpu().tolist())
        except Exception:  # noqa: BLE001 - a tensor without values (fake, meta)
            text = f"tensor{tuple(value.shape)}"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{key}: {compact(item, limit)}" for key, item in value.items()) + "}"
    else:
        text = nested(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nested(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == round(value):
            return str(int(value)) if abs(value) < 1e15 else f"{value:.4g}"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(nested(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.Tensor):
        return compact(value)
    return repr(value) if isinstance(value, str) else str(value)


def plain(value):
    """`value` with tensors as nested lists: JSON-ready."""
    if isinstance(value, torch.Tensor):
        try:
            return value.detach().cpu().tolist()
        except Exception:  # noqa: BLE001 - a tensor without values
            return f"tensor{tuple(value.shape)}"
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
