/** Parses a duration such as "90s" or "15m" into seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+)(s|m)$/.exec(text.trim());
  if (!match) {
    throw new Error(`not a duration: ${text}`);
  }
  const value = Number(match[1]);
  return match[2] === "m" ? value * 60 : value;
}
