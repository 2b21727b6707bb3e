export { parseDuration } from "./duration";
