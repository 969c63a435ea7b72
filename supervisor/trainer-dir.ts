import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';

/**
 * Files the supervisor keeps in a directory its trainer can write: the checkpoint directory, which a `runAs`
 * trainer owns. Between any two calls the trainer may put anything under any name there, such as a symlink to a
 * file of root's or a FIFO, and root follows a symlink wherever it points. So such a file is read only through a
 * descriptor opened without following a symlink (ELOOP) or blocking on a FIFO, and written only by creating a
 * new file under a random name (O_EXCL: never an existing file, symlink or not) and renaming it over the name:
 * rename replaces whatever is there, a symlink itself and never its target.
 */
export function openInTrainerDir(file: string): number {
  return openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
}

/** At most `maxBytes` of the open file `fd`, from its start, as UTF-8. */
export function readUpTo(fd: number, maxBytes: number): string {
  const buf = Buffer.alloc(maxBytes);
  return buf.toString('utf8', 0, readSync(fd, buf, 0, maxBytes, 0));
}

/** Replaces `file` in a trainer's directory with `text` (see openInTrainerDir); a reader sees the old or the new. */
export function replaceInTrainerDir(file: string, text: string): void {
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    try {
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}
