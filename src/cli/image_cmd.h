/* The verbs of `tessera image`, each in its own file. */
#ifndef TESSERA_CLI_IMAGE_CMD_H
#define TESSERA_CLI_IMAGE_CMD_H

/* image_pull.c */
int cli_image_pull(int argc, char **argv);

#endif
