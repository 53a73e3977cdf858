import { readFileSync } from "node:fs";

/**
 * CPU time (user + system) in ms of a process, or of one of its threads given `tid`, from
 * /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat (clock ticks of 10 ms).
 */
export const cpuMs = (pid: number, tid?: number): number => {
  const fields = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
