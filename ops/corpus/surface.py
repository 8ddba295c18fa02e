"""The surface forms real documents use for the same value: digit widths, date styles, amounts
in 大写 (financial numerals), phone number spacing."""

from __future__ import annotations

import random
from datetime import date

FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
CN_DIGITS = "〇一二三四五六七八九"
UPPER_DIGITS = "零壹贰叁肆伍陆柒捌玖"
UPPER_UNITS = ["", "拾", "佰", "仟"]
UPPER_GROUPS = ["", "万", "亿"]


def full_width(text: str) -> str:
    return text.translate(FULL_WIDTH)


def upper_amount(yuan: int) -> str:
    """An integer amount of yuan in financial numerals: 520000 -> 伍拾贰万元整."""
    if yuan == 0:
        return "零元整"
    groups = []
    while yuan:
        groups.append(yuan % 10000)
        yuan //= 10000
    out = ""
    zero_pending = False
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            zero_pending = bool(out)
            continue
        if out and (zero_pending or group < 1000):
            out += "零"
        out += _upper_group(group) + UPPER_GROUPS[index]
        zero_pending = False
    return out + "元整"


def _upper_group(n: int) -> str:
    digits = [int(d) for d in f"{n:04d}"]
    out, zero = "", False
    for position, digit in enumerate(digits):
        unit = UPPER_UNITS[3 - position]
        if digit == 0:
            zero = bool(out)
            continue
        if zero:
            out += "零"
            zero = False
        out += UPPER_DIGITS[digit] + unit
    return out


def amount(rng: random.Random, yuan: int) -> str:
    style = rng.randrange(5)
    if style == 0:
        return "人民币" + upper_amount(yuan)
    if style == 1:
        return f"¥{yuan:,.2f}"
    if style == 2 and yuan % 10000 == 0:
        return f"{yuan // 10000}万元"
    if style == 3:
        return full_width(f"{yuan}") + "元"
    return f"人民币{yuan}元"


def chinese_number(n: int) -> str:
    """Small counts as words: 3 -> 三, 12 -> 十二, 24 -> 二十四."""
    if n < 10:
        return CN_DIGITS[n] if n else "零"
    tens, ones = divmod(n, 10)
    return ("" if tens == 1 else CN_DIGITS[tens]) + "十" + (CN_DIGITS[ones] if ones else "")


def date_text(rng: random.Random, day: date) -> str:
    style = rng.randrange(6)
    y, m, d = day.year, day.month, day.day
    if style == 0:
        return f"{y}年{m}月{d}日"
    if style == 1:
        return f"{y}-{m:02d}-{d:02d}"
    if style == 2:
        return f"{y}/{m}/{d}"
    if style == 3:
        return "".join(CN_DIGITS[int(c)] for c in str(y)) + f"年{chinese_number(m)}月{chinese_number(d)}日"
    if style == 4:
        return f"{y}.{m:02d}.{d:02d}"
    return full_width(f"{y}年{m}月{d}日")


def phone(rng: random.Random, number: str) -> str:
    style = rng.randrange(4)
    if style == 1:
        return f"{number[:3]} {number[3:7]} {number[7:]}"
    if style == 2:
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if style == 3:
        return full_width(number)
    return number
