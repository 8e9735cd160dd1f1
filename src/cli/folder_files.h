/* `tessera folder` verbs on the files in a folder (folder_files.c): each
 * gets argv from the verb on and returns the exit code. */
#ifndef TESSERA_CLI_FOLDER_FILES_H
#define TESSERA_CLI_FOLDER_FILES_H

int folder_files_cmd(int argc, char **argv);
int folder_upload_cmd(int argc, char **argv);
int folder_download_cmd(int argc, char **argv);
int folder_mkdir_cmd(int argc, char **argv);
int folder_mv_cmd(int argc, char **argv);
int folder_rm_file_cmd(int argc, char **argv);

#endif
