"""Chinese numerals (小写 and 大写) through cn2an, behind a call that never raises."""

from __future__ import annotations

from decimal import Decimal

import cn2an


def chinese_number(text: str) -> Decimal | None:
    """The value of a Chinese numeral such as 二〇二四, 十五 or 壹佰元伍角; None when cn2an cannot read it."""
    try:
        value = cn2an.cn2an(text, "normal")
    # cn2an signals bad input with ValueError but lets KeyError and IndexError escape on some malformed
    # numerals (〇十〇); a value that is not a number must never stop the pipeline.
    except (ValueError, KeyError, IndexError):
        return None
    # cn2an returns floats for 角 and 分; they are hundredths at most, so 4 places drop only float noise.
    return round(Decimal(str(value)), 4)
