/** Appends the Luhn check digit to a partial card number. */
export function withLuhnDigit(partial: string): string {
  let sum = 0;
  for (let i = 0; i < partial.length; i++) {
    let d = Number(partial[partial.length - 1 - i]);
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return partial + ((10 - (sum % 10)) % 10);
}

export function isLuhnValid(number: string): boolean {
  return withLuhnDigit(number.slice(0, -1)) === number;
}
